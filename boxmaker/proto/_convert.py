"""The one strict cattrs converter of the project (02-wire).

cattrs coerces by default (``int("5")``, ``str(5)``, ``bool(1)``, a string
iterated into a list).  Here every primitive has a strict hook, unknown keys
are refused at every depth, every attrs field without a default must be
present, and sum types are externally tagged objects with exactly one key.

Two converters are configured identically: a fast one without detailed
validation for the hot path, and a detailed one that is consulted only when
the fast one fails, to say *where* the input is wrong.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, NewType, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn

from .._errors import PeerError
from ._errors import DecodeError
from ._json import JSONValue, dumps_bytes, loads_object, type_word

T = TypeVar("T")

U64 = NewType("U64", int)
"""An unsigned 64-bit integer: 0 ..= 2**64-1, never a boolean or a float."""

JsonObject = NewType("JsonObject", dict)  # type: ignore[type-arg]
"""Any JSON object, kept as parsed (already strictly checked by _json)."""

U64_MAX = 2**64 - 1
_NONE_TYPE = type(None)


class InvalidValue(PeerError, ValueError):
    """A value that breaks a rule of its type (a grammar, a length, a format).

    Raised by the attrs validators of message classes.  Built by our own code,
    it is our bug (a plain ValueError); met while decoding, the converter turns
    it into a DecodeError.  Its message must not quote the value.
    """


_CATTRS_ERRORS = (
    InvalidValue,
    ForbiddenExtraKeysError,
    ClassValidationError,
    IterableValidationError,
)


_BAD_INPUT = (DecodeError, KeyError, *_CATTRS_ERRORS)
"""What structuring raises for input that does not fit: our hooks' DecodeError, a
missing field's KeyError, a validator's InvalidValue, cattrs' unknown keys and its
detailed groups.  Anything else is a bug."""


def _fail(message: str) -> DecodeError:
    return DecodeError(message)


def _structure_int(value: Any, _: type) -> int:
    if type(value) is not int:
        raise _fail(f"expected an integer, found {type_word(value)}")
    return value


def _structure_u64(value: Any, _: type) -> int:
    if type(value) is not int:
        raise _fail(f"expected an unsigned 64-bit integer, found {type_word(value)}")
    if not 0 <= value <= U64_MAX:
        raise _fail("integer out of the range 0..2**64-1")
    return value


def _structure_str(value: Any, _: type) -> str:
    if type(value) is not str:
        raise _fail(f"expected a string, found {type_word(value)}")
    return value


def _structure_bool(value: Any, _: type) -> bool:
    if type(value) is not bool:
        raise _fail(f"expected a boolean, found {type_word(value)}")
    return value


def _structure_float(value: Any, _: type) -> float:
    if type(value) not in (int, float):
        raise _fail(f"expected a number, found {type_word(value)}")
    return float(value)


def _structure_none(value: Any, _: type) -> None:
    if value is not None:
        raise _fail(f"expected null, found {type_word(value)}")


def _structure_json_object(value: Any, _: type) -> dict[str, Any]:
    if type(value) is not dict:
        raise _fail(f"expected an object, found {type_word(value)}")
    return value


def _structure_any(value: Any, _: type) -> Any:
    return value


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


class _TaggedRegistry:
    """Sum types registered as externally tagged unions."""

    def __init__(self) -> None:
        self.by_members: dict[frozenset[type], dict[str, type]] = {}

    def lookup(self, tp: Any) -> tuple[dict[str, type], bool] | None:
        if not _is_union(tp):
            return None
        args = get_args(tp)
        nullable = _NONE_TYPE in args
        members = frozenset(a for a in args if a is not _NONE_TYPE)
        tags = self.by_members.get(members)
        if tags is None:
            return None
        return tags, nullable


_tagged = _TaggedRegistry()


def _literal_hook(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(tp)

    def structure(value: Any, _: Any) -> Any:
        for choice in allowed:
            if type(value) is type(choice) and value == choice:
                return value
        words = ", ".join(json.dumps(c) for c in allowed)
        raise _fail(f"expected one of {words}")

    return structure


def _configure(conv: cattrs.Converter) -> None:
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(_NONE_TYPE, _structure_none)
    conv.register_structure_hook(U64, _structure_u64)
    conv.register_structure_hook(JsonObject, _structure_json_object)
    conv.register_structure_hook(Any, _structure_any)
    conv.register_unstructure_hook(U64, int)
    conv.register_unstructure_hook(JsonObject, lambda v: v)

    conv.register_structure_hook_factory(
        lambda t: get_origin(t) is typing.cast(Any, Literal), _literal_hook
    )

    def list_factory(tp: Any) -> Callable[[Any, Any], Any]:
        (item_type,) = get_args(tp) or (Any,)
        item_hook = conv.get_structure_hook(item_type)

        def structure(value: Any, _: Any) -> list[Any]:
            if type(value) is not list:
                raise _fail(f"expected an array, found {type_word(value)}")
            out = []
            for index, item in enumerate(value):
                try:
                    out.append(item_hook(item, item_type))
                except DecodeError as exc:
                    raise DecodeError(exc.message, path=_join(f"[{index}]", exc.path)) from None
            return out

        return structure

    def is_list(t: Any) -> bool:
        return t is list or get_origin(t) in (list, typing.Sequence, tuple) or (
            get_origin(t) is not None and getattr(get_origin(t), "__name__", "") == "Sequence"
        )

    conv.register_structure_hook_factory(is_list, list_factory)

    def dict_factory(tp: Any) -> Callable[[Any, Any], Any]:
        key_type, value_type = get_args(tp) or (str, Any)
        value_hook = conv.get_structure_hook(value_type)
        if key_type is not str:  # pragma: no cover - our own bug
            raise TypeError(f"JSON object keys are strings, not {key_type}")

        def structure(value: Any, _: Any) -> dict[str, Any]:
            if type(value) is not dict:
                raise _fail(f"expected an object, found {type_word(value)}")
            out = {}
            for key, item in value.items():
                try:
                    out[key] = value_hook(item, value_type)
                except DecodeError as exc:
                    raise DecodeError(exc.message, path=_join(_key_path(key), exc.path)) from None
            return out

        return structure

    conv.register_structure_hook_factory(
        lambda t: t is dict or get_origin(t) in (dict, typing.cast(Any, Mapping)), dict_factory
    )

    def attrs_factory(cls: Any) -> Callable[[Any, Any], Any]:
        inner = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True)
        names = [a.name for a in attrs.fields(cls)]

        def structure(value: Any, _: Any) -> Any:
            if type(value) is not dict:
                raise _fail(f"expected an object, found {type_word(value)}")
            try:
                return inner(value, cls)
            except _CATTRS_ERRORS as exc:
                bug = _not_bad_input(exc)
                if bug is not None:
                    raise bug from None
                raise _describe(exc, "") from None

        structure.__doc__ = f"strict structure of {cls.__name__} ({', '.join(names)})"
        return structure

    conv.register_structure_hook_factory(attrs.has, attrs_factory)

    def tagged_structure_factory(tp: Any) -> Callable[[Any, Any], Any]:
        found = _tagged.lookup(tp)
        assert found is not None
        tags, nullable = found

        def structure(value: Any, _: Any) -> Any:
            if value is None and nullable:
                return None
            if type(value) is not dict:
                raise _fail(f"expected a tagged object, found {type_word(value)}")
            if len(value) != 1:
                words = ", ".join(json.dumps(t) for t in tags)
                raise _fail(f"expected exactly one key of {words}, found {len(value)} keys")
            ((tag, inner),) = value.items()
            cls = tags.get(tag)
            if cls is None:
                words = ", ".join(json.dumps(t) for t in tags)
                raise _fail(f"unknown tag {json.dumps(tag)}; expected one of {words}")
            return _strict_structure(conv, inner, cls, _key_path(tag))

        return structure

    conv.register_structure_hook_factory(
        lambda t: _tagged.lookup(t) is not None, tagged_structure_factory
    )

    def tagged_unstructure_factory(tp: Any) -> Callable[[Any], Any]:
        found = _tagged.lookup(tp)
        assert found is not None
        tags, _nullable = found
        by_class = {cls: tag for tag, cls in tags.items()}

        def unstructure(value: Any) -> Any:
            if value is None:
                return None
            return {by_class[type(value)]: conv.unstructure(value, type(value))}

        return unstructure

    conv.register_unstructure_hook_factory(
        lambda t: _tagged.lookup(t) is not None, tagged_unstructure_factory
    )


def _key_path(key: str) -> str:
    if key.isidentifier() and key.isascii():
        return f".{key}"
    return f"[{json.dumps(key)}]"


def _join(head: str, tail: str | None) -> str:
    if not tail:
        return head
    if tail.startswith("$"):
        tail = tail[1:]
    return head + tail


def _strict_structure(conv: cattrs.Converter, value: Any, cls: Any, path: str) -> Any:
    try:
        return conv.structure(value, cls)
    except DecodeError as exc:
        raise DecodeError(exc.message, path=_join(path, exc.path)) from None


_fast = cattrs.Converter(forbid_extra_keys=True, detailed_validation=False)
_detailed = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
_configure(_fast)
_configure(_detailed)

converter = _fast
"""The project's converter, for unstructuring and for registering hooks."""


def register_tagged_union(union: Any, tags: dict[str, type]) -> None:
    """Declare `union` (``A | B | C``) as an externally tagged sum type."""
    members = frozenset(a for a in get_args(union) if a is not _NONE_TYPE)
    if members != frozenset(tags.values()):  # pragma: no cover - our own bug
        raise TypeError("the tags must name exactly the union's members")
    _tagged.by_members[members] = dict(tags)


def register_structure_hook(tp: Any, hook: Callable[[Any, Any], Any]) -> None:
    """Register a custom structure hook on both converters."""
    _fast.register_structure_hook(tp, hook)
    _detailed.register_structure_hook(tp, hook)


def register_unstructure_hook(tp: Any, hook: Callable[[Any], Any]) -> None:
    _fast.register_unstructure_hook(tp, hook)
    _detailed.register_unstructure_hook(tp, hook)


def omit_when_none(cls: type[Any], name: str) -> None:
    """Write `cls` without the key `name` when its value is None: an optional field newer
    than the format, so that a value without it is written exactly as before.  The
    inner function is made when the first value is written, not at import."""
    made: list[Callable[[Any], dict[str, Any]]] = []

    def unstructure(value: Any) -> dict[str, Any]:
        if not made:
            made.append(make_dict_unstructure_fn(cls, _fast))
        payload: dict[str, Any] = made[0](value)
        if payload.get(name, 0) is None:
            del payload[name]
        return payload

    register_unstructure_hook(cls, unstructure)


def structure(value: Any, cls: type[T] | Any) -> T:
    """Structure an already-parsed JSON value into `cls`, strictly.

    Raises DecodeError naming the path of the first problem.
    A failure that is not bad input (any other exception: a converter or hook
    bug) goes up as it is, never reported as the input's fault.
    """
    try:
        result: T = _fast.structure(value, cls)
        return result
    except _BAD_INPUT:
        pass
    try:
        _detailed.structure(value, cls)
    except DecodeError as exc:
        raise DecodeError(exc.message, path=_join("$", exc.path)) from None
    except _BAD_INPUT as exc:
        bug = _not_bad_input(exc)
        if bug is not None:
            raise bug from None
        raise _describe(exc, "$") from None
    raise DecodeError("the value does not fit its type", path="$")  # pragma: no cover


def _not_bad_input(exc: BaseException) -> BaseException | None:
    """The first failure under `exc` (cattrs' detailed errors group them) that is
    not bad input: a bug, to be raised as it is."""
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        for sub in exc.exceptions:
            found = _not_bad_input(sub)
            if found is not None:
                return found
        return None
    return None if isinstance(exc, _BAD_INPUT) else exc


def _describe(exc: BaseException, path: str) -> DecodeError:
    """Turn cattrs' detailed errors into one DecodeError with a path."""
    if isinstance(exc, DecodeError):
        return DecodeError(exc.message, path=_join(path, exc.path))
    if isinstance(exc, InvalidValue):
        return DecodeError(str(exc), path=path or None)
    if isinstance(exc, ForbiddenExtraKeysError):
        keys = ", ".join(json.dumps(k[:64]) for k in sorted(exc.extra_fields))
        return DecodeError(f"unknown field {keys}", path=path or None)
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        for sub in exc.exceptions:
            if isinstance(sub, KeyError):
                return _describe(sub, path)
            return _describe(sub, path + _field_note(sub))
    if isinstance(exc, KeyError):
        return DecodeError(
            f"required field {json.dumps(exc.args[0])} is missing", path=path or None
        )
    return DecodeError(f"invalid value ({type(exc).__name__})", path=path or None)


def _field_note(exc: BaseException) -> str:
    notes = getattr(exc, "__notes__", None) or []
    for note in notes:
        name = getattr(note, "name", None)
        if name is not None:
            if isinstance(name, int):
                return f"[{name}]"
            return _key_path(str(name))
    return ""


def unstructure(value: Any, cls: Any = None) -> JSONValue:
    return _fast.unstructure(value, cls) if cls is not None else _fast.unstructure(value)


def decode(data: bytes | str, cls: type[T] | Any) -> T:
    """Strict JSON text of one object -> an instance of `cls`."""
    result: T = structure(loads_object(data), cls)
    return result


def encode(value: Any, cls: Any = None) -> bytes:
    """An instance -> compact UTF-8 JSON."""
    return dumps_bytes(unstructure(value, cls))
