"""Canonical bytes of 12 "Pins": ``canonical(v)`` and the SHA-256 of it.

``canonical(v)`` is ``json.dumps(v, ensure_ascii=True, separators=(",", ":"),
sort_keys=True, allow_nan=False)`` of a value as strictly decoded (02-wire):
ASCII, keys sorted by code point at every depth, integers in decimal, floats as
Python's ``repr`` (``1e2`` is ``100.0``, ``1`` stays ``1``).  It is *not* RFC
8785 (JCS): JCS writes numbers as ECMAScript does (``100``), leaves non-ASCII
raw and sorts keys by UTF-16 code units (docs/decisions.md).  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from .._errors import DecodeError
from .._json import MAX_DEPTH


def check_value(value: Any) -> None:
    """Raise DecodeError unless `value` is what the strict decoder yields: dicts with
    string keys, lists, strings without lone surrogates, bools, None, integers and
    finite floats within a 64-bit float's range, nested at most 64 deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= MAX_DEPTH:
                raise DecodeError(f"nesting deeper than {MAX_DEPTH}")
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise DecodeError("an object key that is not a string")
                _check_text(key)
                stack.append((sub, depth + 1))
        elif isinstance(item, list):
            if depth >= MAX_DEPTH:
                raise DecodeError(f"nesting deeper than {MAX_DEPTH}")
            stack.extend((sub, depth + 1) for sub in item)
        elif isinstance(item, str):
            _check_text(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            try:
                float(item)
            except OverflowError:
                raise DecodeError("a number that is not a finite 64-bit float") from None
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise DecodeError("NaN or Infinity")
        else:
            raise DecodeError(f"not a JSON value: {type(item).__name__}")


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise DecodeError("lone surrogate in a string") from None


def canonical_text(value: Any) -> str:
    """``canonical(value)`` as text (ASCII); the value is checked first."""
    check_value(value)
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=True,
                      allow_nan=False)


def canonical_bytes(value: Any) -> bytes:
    return canonical_text(value).encode("ascii")


def canonical_sha256(value: Any) -> str:
    """SHA-256 of ``canonical(value)``, 64 lowercase hex digits."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
