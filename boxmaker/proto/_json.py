"""Strict JSON text <-> Python values (02-wire, "Framing").

Parsing refuses: non-UTF-8 bytes, lone surrogates (raw or as ``\\ud800``
escapes), duplicate keys at any depth, ``NaN``/``Infinity``, nesting deeper
than 64, and any top-level value that is not an object.  No I/O here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ._errors import DecodeError

MAX_DEPTH = 64

JSONValue = Any  # a value made only of dict/list/str/int/float/bool/None


def _no_constant(name: str) -> Any:
    raise DecodeError(f"{name} is not allowed")


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DecodeError(f"duplicate key {json.dumps(key)}")
        result[key] = value
    return result


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DecodeError("a number too large for a 64-bit float")
    return value


_decoder = json.JSONDecoder(
    object_pairs_hook=_pairs_hook,
    parse_constant=_no_constant,
    parse_float=_parse_float,
    strict=True,
)


def _check_strings_and_depth(value: Any) -> None:
    """Walk the parsed value: depth at most MAX_DEPTH, no lone surrogates."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_DEPTH:
                raise DecodeError(f"nesting deeper than {MAX_DEPTH}")
            for key, sub in item.items():
                _check_text(key)
                if isinstance(sub, (dict, list)):
                    stack.append((sub, depth + 1))
                elif isinstance(sub, str):
                    _check_text(sub)
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                raise DecodeError(f"nesting deeper than {MAX_DEPTH}")
            for sub in item:
                if isinstance(sub, (dict, list)):
                    stack.append((sub, depth + 1))
                elif isinstance(sub, str):
                    _check_text(sub)
        elif isinstance(item, str):
            _check_text(item)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise DecodeError("lone surrogate in a string") from None


def loads_value(data: bytes | str) -> JSONValue:
    """Parse one strict JSON value of any kind."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"not valid UTF-8 at byte {exc.start}") from None
    else:
        text = data
        _check_text(text)
    try:
        value = _decoder.decode(text)
    except DecodeError:
        raise
    except RecursionError:
        raise DecodeError(f"nesting deeper than {MAX_DEPTH}") from None
    except json.JSONDecodeError as exc:
        raise DecodeError(f"not JSON: {exc.msg} at character {exc.pos}") from None
    except ValueError:
        # int() refuses integers of more than sys.get_int_max_str_digits() digits
        raise DecodeError("an integer with too many digits") from None
    _check_strings_and_depth(value)
    return value


def loads_object(data: bytes | str) -> dict[str, Any]:
    """Parse strict JSON that must be exactly one object."""
    value = loads_value(data)
    if not isinstance(value, dict):
        raise DecodeError(f"expected a JSON object, found {type_word(value)}")
    return value


def dumps(value: JSONValue, *, ascii_only: bool = False, sort_keys: bool = False) -> str:
    """Compact JSON text.  Refuses NaN/Infinity (our own bug if present)."""
    return json.dumps(
        value,
        ensure_ascii=ascii_only,
        separators=(",", ":"),
        allow_nan=False,
        sort_keys=sort_keys,
    )


def dumps_terminal(value: JSONValue) -> str:
    """Compact JSON for a terminal (every ``--json`` output): ASCII only, every
    control escaped (``ensure_ascii`` leaves DEL raw, so it is escaped too)."""
    return dumps(value, ascii_only=True).replace("\x7f", "\\u007f")


def nesting_depth(value: JSONValue) -> int:
    """How deep `value` nests: 0 for a scalar, 1 for a flat object or list."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return deepest


def dumps_bytes(value: JSONValue) -> bytes:
    return dumps(value).encode("utf-8")


def canonical(value: JSONValue) -> JSONValue:
    """The same value with every object's keys in sorted order (for audit args)."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def type_word(value: Any) -> str:
    """The JSON name of a Python value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
