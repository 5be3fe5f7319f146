"""The verifier's fast line check: one regular expression per event.

A valid record line has exactly one form (`_audit`: ASCII, compact, keys in
order, strings escaped the way the encoder escapes them, arguments
canonical).  So a line can be checked by matching it against a regular
expression generated from the record classes, with no JSON parsing and no
objects built, except for a call's free-form arguments, which are parsed
and re-encoded.  `check_record_line` tries that first and falls back to
`parse_record` (the authority, with precise messages) for anything the
expression does not match; tests compare the two on valid and damaged lines.
Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from datetime import date
from types import UnionType
from typing import Any, Literal, NamedTuple, Union, get_args, get_origin, get_type_hints

import attrs

from .._convert import U64, JsonObject
from ._audit import (
    EVENT_TYPES,
    ApprovalRecord,
    BoundedCall,
    Call,
    DecisionOutcome,
    DecisionRecord,
    Declassify,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    OutputDigest,
    Record,
    Recovery,
    RedecisionOutcome,
    ResultRecord,
    dump_json,
    event_key,
    parse_record,
    scan_json,
)
from ._audit_passkey import PasskeyUse
from ._audit_rules import canonical_within

# A JSON string exactly as the encoder writes it (ensure_ascii): printable
# ASCII but `"` and `\`, the short escapes, \u escapes only for what has no
# other form.  Surrogate escapes (\ud800..\udfff) never reach this pattern:
# lines holding "\ud" take the strict path.  A run of plain characters is one
# step of the matcher (`[...]++`), not one alternation per character; the
# quantifiers are possessive since a plain run and an escape cannot overlap.
_CHAR = (
    r'(?:[ !#-\[\]-~]++|\\["\\bfnrt]|\\u000[0-7bef]|\\u001[0-9a-f]|\\u007f'
    r"|\\u00[89a-f][0-9a-f]|\\u0[1-9a-f][0-9a-f]{2}|\\u[1-9a-f][0-9a-f]{3})"
)
_STRING = f'"{_CHAR}*+"'
# u64 up to 19 digits (all below 2**64); 20 digits take the strict path.
_U64 = r"(?:0|[1-9][0-9]{0,18})"
_TS = (
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
)
_HEX64 = r"[0-9a-f]{64}"
_SESSION = r'"[a-z0-9][a-z0-9-]{0,63}"'

_TOP = re.compile(
    rf'\{{"seq":(?P<seq>{_U64}),"ts":"(?P<ts>{_TS})","prev":"(?P<prev>{_HEX64})","(?P<key>[a-z_]+)":'
)

_TAGGED: dict[Any, dict[str, type[Any]]] = {
    DecisionOutcome: {"allowed": OutcomeAllowed, "ask": OutcomeAsk, "denied": OutcomeDenied},
    RedecisionOutcome: {"allowed": OutcomeAllowed, "denied": OutcomeDenied},
}
_JSON_NAMES: dict[tuple[type[Any], str], str] = {(Declassify, "from_"): "from"}
# Fields with a narrower form than their type, or captured for the verifier.
_FIELDS: dict[tuple[type[Any], str], str] = {
    (Call, "session"): _SESSION,
    (BoundedCall, "session"): _SESSION,
    (Declassify, "session"): _SESSION,
    (Call, "tool"): f"(?P<tool>{_STRING})",
    (BoundedCall, "tool"): f"(?P<tool>{_STRING})",
    (Call, "args"): r"(?P<args>\{.*\})",
    (BoundedCall, "args"): r"(?P<args>\{.*\})",
    (BoundedCall, "omitted"): f'(?P<omitted>null|\\{{"bytes":{_U64},"sha256":"{_HEX64}"\\}})',
    (OutcomeAsk, "expires_at"): f'"(?P<expires>{_TS})"',
    (OutputDigest, "sha256"): f'"{_HEX64}"',
    (Recovery, "sha256"): f'"{_HEX64}"',
    (DecisionRecord, "call"): f"(?P<call>{_U64})",
    (ApprovalRecord, "call"): f"(?P<call>{_U64})",
    (ResultRecord, "call"): f"(?P<call>{_U64})",
    # 12: nothing ran; its rule (output null) is the strict parser's.
    (ResultRecord, "status"): '"(?:ok|tool_failed|timeout|runner_unavailable|unsafe_target)"',
    (DecisionRecord, "pin"): f'"{_HEX64}"',
    (ApprovalRecord, "verdict"): '"(?P<verdict>approved|refused|expired|requester_gone|abandoned)"',
    (ApprovalRecord, "by"): f"(?P<by>null|{_U64})",
    (PasskeyUse, "credential_id"): '"[A-Za-z0-9_-]{1,65536}"',
    (PasskeyUse, "assertion_sha256"): f'"{_HEX64}"',
}
_STRICT_ONLY = frozenset({"passkey", "approval_attempt", "sources", "mcp_pin", "mcp_server"})
"""Rare records whose field rules (`_audit_passkey`, `_audit_mcp`) only the strict parser
checks."""


_LEFT_OUT_WHEN_NONE = {(ApprovalRecord, "passkey"), (DecisionRecord, "pin")}
"""Trailing fields that a record leaves out when they are None (newer than the format)."""
_SLOW_LEFT_OUT = {(DecisionRecord, "effective_args"), (ResultRecord, "source")}
"""Trailing fields left out when None that the expression never matches: a line that
holds one takes the strict path (tool-source calls, 12)."""


def _member(tp: Any) -> Any:
    (member,) = [arg for arg in get_args(tp) if arg is not type(None)]
    return member


def _pattern(tp: Any, owner: type[Any] | None = None, name: str | None = None) -> str:
    special = _FIELDS.get((owner, name)) if owner is not None and name is not None else None
    if special is not None:
        return special
    if tp is U64:
        return _U64
    if tp is str:
        return _STRING
    if tp is bool:
        return "(?:true|false)"
    if tp is JsonObject:  # pragma: no cover - only Call.args, handled above
        raise TypeError("a free-form object needs its own field pattern")
    if tp in _TAGGED:
        options = []
        for tag, cls in _TAGGED[tp].items():
            inner = f'"{tag}":{_pattern(cls)}'
            options.append(f"(?P<allowed>{inner})" if tag == "allowed" else inner)
        return r"\{(?:" + "|".join(options) + r")\}"
    origin = get_origin(tp)
    if origin is Literal:
        return "(?:" + "|".join(re.escape(json.dumps(word)) for word in get_args(tp)) + ")"
    if origin in (Union, UnionType):
        (member,) = [arg for arg in get_args(tp) if arg is not type(None)]
        inner = _pattern(member)
        if owner is ApprovalRecord and name == "redecision":
            return f"(?:null|(?P<redecision>{inner}))"
        return f"(?:null|{inner})"
    if attrs.has(tp):
        hints = get_type_hints(tp)
        parts = [
            f'"{_JSON_NAMES.get((tp, f.name), f.name)}":{_pattern(hints[f.name], tp, f.name)}'
            for f in attrs.fields(tp)
            if (tp, f.name) not in _LEFT_OUT_WHEN_NONE and (tp, f.name) not in _SLOW_LEFT_OUT
        ]
        optional = "".join(
            f'(?:,"{f.name}":{_pattern(_member(hints[f.name]), tp, f.name)})?'
            for f in attrs.fields(tp) if (tp, f.name) in _LEFT_OUT_WHEN_NONE
        )
        return r"\{" + ",".join(parts) + optional + r"\}"
    raise TypeError(f"no pattern for {tp!r}")  # pragma: no cover - our own bug


_EVENT_PATTERNS: dict[str, re.Pattern[str]] = {
    key: re.compile(_pattern(cls) + r"\}") for key, cls in EVENT_TYPES.items()
    if key not in _STRICT_ONLY
}
_LEGACY_CALL = re.compile(_pattern(Call) + r"\}")
"""A call record of the form written before issue 11 (no `omitted`)."""

_ARGS_DEPTH = 3
_MAX_TOOL = 1024


class LineFacts(NamedTuple):
    """What the verifier needs of a valid record line."""

    seq: int
    prev: str
    key: str
    call: int | None
    """The call a decision, approval or result names."""
    lets_run: bool
    """An allowed decision, or an approval whose re-decision allowed the call."""


_new_facts = tuple.__new__  # LineFacts without its Python-level __new__
_dates: dict[str, bool] = {}


def _date_ok(day: str) -> bool:
    known = _dates.get(day)
    if known is None:
        try:
            date.fromisoformat(day)
            known = True
        except ValueError:
            known = False
        if len(_dates) > 4096:
            _dates.clear()
        _dates[day] = known
    return known


def _scan(line: bytes) -> LineFacts | None:
    """The facts of a line in its one form, or None when unsure."""
    if not line.isascii() or b"\\ud" in line:
        return None
    text = line.decode("ascii")
    top = _TOP.match(text)
    if top is None:
        return None
    key = top.group("key")
    pattern = _EVENT_PATTERNS.get(key)
    if pattern is None or key in _STRICT_ONLY:
        return None
    event = pattern.fullmatch(text, top.end())
    if event is None and key == "call":
        event = _LEGACY_CALL.fullmatch(text, top.end())
    seq, ts, prev = top.group("seq", "ts", "prev")
    if event is None or not _date_ok(ts[:10]):
        return None
    call: int | None = None
    lets_run = False
    if key == "decision":
        number, allowed, expires = event.group("call", "allowed", "expires")
        call = int(number)
        lets_run = allowed is not None
        if expires is not None and not _date_ok(expires[:10]):
            return None
    elif key == "result":
        call = int(event.group("call"))
    elif key == "approval":
        number, verdict, redecision, allowed = event.group(
            "call", "verdict", "redecision", "allowed")
        call = int(number)
        if (verdict == "approved") != (redecision is not None):
            return None
        if verdict == "abandoned" and event.group("by") != "null":
            return None
        lets_run = allowed is not None
    elif key == "call" and not _call_ok(event):
        return None
    return _new_facts(LineFacts, (int(seq), prev, key, call, lets_run))


def _call_ok(event: re.Match[str]) -> bool:
    omitted = event.group("omitted") if "omitted" in event.re.groupindex else "null"
    return _args_ok(event.group("tool"), event.group("args"), omitted)


def _args_ok(tool: str, args: str, omitted: str) -> bool:
    """A call's tool (as written, quoted) within its bound, and its arguments (as
    written) one JSON object in their one form; `omitted` as written ("null" when
    the arguments are there)."""
    if len(tool) > _MAX_TOOL + 2 and len(json.loads(tool)) > _MAX_TOOL:
        return False
    if omitted != "null" and args != "{}":
        return False  # omitted arguments are written as {}
    try:
        value, end = scan_json(args, 0)
        return (
            end == len(args)
            and type(value) is dict
            and canonical_within(value, _ARGS_DEPTH)
            and dump_json(value) == args  # also: no duplicate key, no NaN
        )
    except (ValueError, StopIteration, RecursionError):
        return False


def facts_of(record: Record) -> LineFacts:
    """The same facts, from a parsed record."""
    event: Any = record.event
    key = event_key(event)
    call: int | None = None
    lets_run = False
    if key == "decision":
        call = event.call
        lets_run = type(event.outcome) is OutcomeAllowed
    elif key in ("result", "mcp_server"):
        call = event.call
    elif key == "approval":
        call = event.call
        lets_run = event.redecision is not None and type(event.redecision.outcome) is (
            OutcomeAllowed)
    return LineFacts(record.seq, record.prev, key, call, lets_run)


def check_record_line(line: bytes) -> LineFacts:
    """Check a line exactly as `parse_record` does, without building the record.

    Raises `RecordJsonError` or `RecordSchemaError` (from `parse_record`).
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    facts = _scan(line)
    if facts is not None:
        return facts
    return facts_of(parse_record(line))
