"""What every socket of 02-wire shares: envelopes, errors, timestamps, grammars.

A request frame is ``{"v": 1, "id": U64, <exactly one request key>: {...}}``;
a response frame is ``{"id": U64, <exactly one answer key>: ...}`` (the id is
``null`` only in an ``error`` frame answering a request whose id could not be
read).  The messages of each socket live in ``_wire_broker``, ``_wire_admin``
and ``_wire_loop``; they use the envelope functions below.  Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar, get_args

import attrs

from ... import _error_table, _errors
from ..._errors import BoxmakerError
from .._convert import U64_MAX, InvalidValue, structure, unstructure
from .._errors import DecodeError
from .._json import dumps_bytes, loads_object, type_word

VERSION: Final = 1

# --- errors -----------------------------------------------------------------


class BadVersion(DecodeError):
    """A request whose ``v`` is not 1: answered with error ``bad_version``."""

    wire_code = "bad_version"
    runbook = "docs/runbook.md#bad-frame"

    def __init__(self, message: str, *, id: int | None) -> None:
        super().__init__(message, path="$.v")
        self.id = id


# The codes live with the error classes (boxmaker/_errors.py), their runbook
# pointers in the one error table (boxmaker/_error_table.py); these names are
# kept for the sockets' modules.
ErrorCode = _errors.ErrorCode
ERROR_CODES: Final[tuple[ErrorCode, ...]] = get_args(ErrorCode)
ERROR_RUNBOOKS: Final = _error_table.ERROR_RUNBOOKS
"""02-wire "Errors": every error code and its runbook pointer (or None)."""

DenialCode = _error_table.DenialCode
DENIAL_CODES: Final[tuple[DenialCode, ...]] = get_args(DenialCode)
DENIAL_RUNBOOKS: Final = _error_table.DENIAL_RUNBOOKS
"""broker.sock denial codes and the runbook pointer each carries."""

# --- field rules (attrs validators; InvalidValue becomes a DecodeError) --------

NAME_PATTERN: Final = "[a-z0-9][a-z0-9-]{0,63}"
_NAME_RE = re.compile(NAME_PATTERN, re.ASCII)
_RUNBOOK_RE = re.compile(r"docs/runbook\.md#[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)
_HEX64_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
_TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z", re.ASCII)
MAX_TOOL_CHARS: Final = 1024


def is_name(text: str) -> bool:
    """Session, conversation and grant ids: ``[a-z0-9][a-z0-9-]{0,63}``."""
    return _NAME_RE.fullmatch(text) is not None


def check_name(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not is_name(value):
        raise InvalidValue(f"{attribute.name} is not of the grammar {NAME_PATTERN}")


def check_optional_name(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        check_name(_, attribute, value)


def check_tool(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if len(value) > MAX_TOOL_CHARS:
        raise InvalidValue(f"{attribute.name} is longer than {MAX_TOOL_CHARS} characters")


def check_runbook(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and _RUNBOOK_RE.fullmatch(value) is None:
        raise InvalidValue(f"{attribute.name} is not a runbook pointer to an anchor")


def check_hex64(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if _HEX64_RE.fullmatch(value) is None:
        raise InvalidValue(f"{attribute.name} is not 64 lowercase hex digits")


def check_ts(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not is_ts(value):
        raise InvalidValue(f"{attribute.name} is not a timestamp YYYY-MM-DDTHH:MM:SS.ffffffZ")


# --- timestamps ------------------------------------------------------------------


def _moment(text: str) -> dt.datetime | None:
    """The aware UTC datetime of an exact, real timestamp; None for anything else.

    The digits are read by position once the pattern matched, and `datetime`
    refuses what is not a real moment (month 13, February 30, hour 24, second
    60), as ``strptime("%Y-%m-%dT%H:%M:%S.%fZ")`` does, without its import and
    its locale tables (a short-lived bxctl pays for those).
    """
    if _TS_RE.fullmatch(text) is None:
        return None
    try:
        return dt.datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]),
                           int(text[11:13]), int(text[14:16]), int(text[17:19]),
                           int(text[20:26]), tzinfo=dt.UTC)
    except ValueError:
        return None


def is_ts(text: str) -> bool:
    """True for an exact, real UTC timestamp ``2026-11-29T07:10:00.000000Z``."""
    return _moment(text) is not None


def parse_ts(text: str) -> dt.datetime:
    """A wire timestamp -> an aware UTC datetime; DecodeError if not exact."""
    moment = _moment(text)
    if moment is None:
        raise DecodeError("not a timestamp of the form YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return moment


def format_ts(moment: dt.datetime) -> str:
    """An aware datetime -> ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC.

    A naive datetime is our own bug (ValueError): its zone is unknown.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("format_ts needs an aware datetime")
    utc = moment.astimezone(dt.UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}Z"
    )


def ts_from_unix(seconds: float) -> str:
    """Seconds since the epoch (``time.time()``) -> a wire timestamp."""
    return format_ts(dt.datetime.fromtimestamp(seconds, tz=dt.UTC))


# --- the error answer, shared by every socket ----------------------------------


@attrs.frozen(kw_only=True)
class ErrorAnswer:
    """``{"error": {"code", "message", "runbook"}}`` on any socket."""

    code: ErrorCode
    message: str
    runbook: str | None = attrs.field(validator=check_runbook)


@attrs.frozen(kw_only=True)
class Ok:
    """``{"ok": {}}``."""


def error_answer(code: ErrorCode, message: str, runbook: str | None = None) -> ErrorAnswer:
    """An error answer with the runbook pointer of the error table (or `runbook`, a
    second pointer of that code given by its own class: #commands-unconfigured)."""
    return ErrorAnswer(code=code, message=message, runbook=runbook or ERROR_RUNBOOKS[code])


def answer_of(error: BoxmakerError) -> ErrorAnswer | None:
    """The answer a socket gives a raised error: its class's wire code, its
    `answer_message`, the code's pointer.  None: the class is answered on no
    socket (the caller lets it propagate)."""
    code = error.wire_code
    if code is None:
        return None
    # a second pointer of a code, given by its own class (#commands-unconfigured)
    second: str | None = getattr(error, "answer_runbook", None)
    return error_answer(code, error.answer_message(), second)


def error_frame(id: int | None, code: ErrorCode, message: str, runbook: str | None) -> bytes:
    """The body of an ``error`` frame, on any socket (``id`` None if unknown)."""
    answer = ErrorAnswer(code=code, message=message, runbook=runbook)
    return encode_response(id, "error", answer, ErrorAnswer)


# --- envelopes ----------------------------------------------------------------------

T = TypeVar("T")


def peek_id(body: bytes) -> int | None:
    """The request's id if the frame is strict JSON with a u64 ``id``, else None."""
    try:
        document = loads_object(body)
    except DecodeError:
        return None
    return _u64_or_none(document.get("id"))


def _u64_or_none(value: object) -> int | None:
    if type(value) is int and 0 <= value <= U64_MAX:
        return value
    return None


def _quote_key(key: str) -> str:
    shown = key if len(key) <= 64 else key[:64] + "..."
    return json.dumps(shown, ensure_ascii=True)


def _read_id(document: Mapping[str, Any], *, nullable: bool) -> int | None:
    if "id" not in document:
        raise DecodeError('required field "id" is missing', path="$")
    value = document["id"]
    if value is None and nullable:
        return None
    if type(value) is not int:
        raise DecodeError(
            f"expected an unsigned 64-bit integer, found {type_word(value)}", path="$.id"
        )
    if not 0 <= value <= U64_MAX:
        raise DecodeError("integer out of the range 0..2**64-1", path="$.id")
    return value


def _one_tag(
    document: Mapping[str, Any], envelope: tuple[str, ...], tags: Mapping[str, Any]
) -> str:
    others = [key for key in document if key not in envelope]
    words = ", ".join(json.dumps(t) for t in tags)
    if not others:
        raise DecodeError(f"no message key; expected one of {words}", path="$")
    if len(others) > 1:
        shown = ", ".join(_quote_key(k) for k in others[:4])
        raise DecodeError(
            f"expected exactly one message key, found {len(others)}: {shown}", path="$"
        )
    (tag,) = others
    if tag not in tags:
        raise DecodeError(f"unknown field {_quote_key(tag)}; expected one of {words}", path="$")
    return tag


def _structure_at(value: object, cls: Any, tag: str) -> Any:
    try:
        return structure(value, cls)
    except DecodeError as exc:
        tail = (exc.path or "$")[1:]
        raise DecodeError(exc.message, path=f"$.{tag}{tail}") from None


def decode_request(body: bytes | str, tags: Mapping[str, Any]) -> tuple[int, str, Any]:
    """``{"v":1,"id":N,<tag>:{...}}`` -> (id, tag, message).

    Raises BadVersion (with the id when it could be read) for a ``v`` other
    than 1, and DecodeError for anything else that is wrong.
    """
    document = loads_object(body)
    if "v" in document:
        version = document["v"]
        if type(version) is not int or version != VERSION:
            shown = (
                str(version)
                if type(version) is int and abs(version) < 10**9
                else type_word(version)
            )
            raise BadVersion(
                f"protocol version must be {VERSION}, found {shown}",
                id=_u64_or_none(document.get("id")),
            )
    else:
        raise DecodeError('required field "v" is missing', path="$")
    request_id = _read_id(document, nullable=False)
    assert request_id is not None
    tag = _one_tag(document, ("v", "id"), tags)
    return request_id, tag, _structure_at(document[tag], tags[tag], tag)


def decode_response(body: bytes | str, tags: Mapping[str, Any]) -> tuple[int | None, str, Any]:
    """``{"id":N,<tag>:...}`` -> (id, tag, message); id is None only for ``error``."""
    document = loads_object(body)
    response_id = _read_id(document, nullable=True)
    tag = _one_tag(document, ("id",), tags)
    if response_id is None and tag != "error":
        raise DecodeError('"id" is null outside an error frame', path="$.id")
    return response_id, tag, _structure_at(document[tag], tags[tag], tag)


def _check_id(id: int | None, *, nullable: bool) -> None:
    if id is None and nullable:
        return
    if type(id) is not int or not 0 <= id <= U64_MAX:
        raise ValueError(f"a frame id must be a u64, not {id!r}")


def encode_request(id: int, tag: str, message: object, cls: Any) -> bytes:
    _check_id(id, nullable=False)
    return dumps_bytes({"v": VERSION, "id": id, tag: unstructure(message, cls)})


def encode_response(id: int | None, tag: str, message: object, cls: Any) -> bytes:
    _check_id(id, nullable=tag == "error")
    return dumps_bytes({"id": id, tag: unstructure(message, cls)})


def tag_table(tags: Mapping[str, Any]) -> dict[type, tuple[str, Any]]:
    """class -> (envelope tag, type to unstructure it with), for encoding.

    A tag whose type is a tagged union (the loop ``event``) maps each member.
    """
    by_class: dict[type, tuple[str, Any]] = {}
    for tag, tp in tags.items():
        members = get_args(tp) if not attrs.has(tp) else (tp,)
        for member in members:
            if member in by_class:  # pragma: no cover - our own bug
                raise TypeError(f"{member.__name__} has two tags")
            by_class[member] = (tag, tp)
    return by_class


def tag_of(by_class: Mapping[type, tuple[str, Any]], message: object) -> tuple[str, Any]:
    found = by_class.get(type(message))
    if found is None:
        raise TypeError(f"{type(message).__name__} is not a message of this socket")
    return found


def expect(kind: type[T], message: object) -> T:
    """`message` if it is a `kind`, else DecodeError (a peer answered out of turn)."""
    if not isinstance(message, kind):
        raise DecodeError(f"expected {kind.__name__}, found {type(message).__name__}")
    return message
