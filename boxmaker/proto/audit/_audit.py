"""Audit records (04-audit): one frozen class per event, and their line form.

A record line is ASCII-only JSON with compact separators and the keys ``seq``,
``ts``, ``prev`` and exactly one event key, in that order; the arguments of a
``call`` are in canonical form (keys sorted at every depth).  There is exactly
one way to write a record: `parse_record` accepts a line only when it is the
very text `encode_record` would produce for the record it holds, so a line
with spaces, duplicate keys, escapes written differently or fields in
another order is refused.  Pure: no I/O.

`parse_record` raises `RecordJsonError` (the line is not strict JSON) or
`RecordSchemaError` (JSON, but not a valid record); both are `DecodeError`.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import json.scanner
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import attrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..._errors import InternalSignal
from .._convert import (
    U64,
    U64_MAX,
    JsonObject,
    converter,
    omit_when_none,
    register_structure_hook,
    register_tagged_union,
    register_unstructure_hook,
    structure,
)
from .._errors import DecodeError
from .._fastcheck import Mismatch, compile_checkers
from .._json import canonical, loads_value, type_word
from .._taint import Label, Taint
from ..wire._wire import DenialCode
from ._audit_mcp import CommandSource, McpPinRecord, McpServerRecord, McpSource, SourcesChanged
from ._audit_passkey import ApprovalAttempt, PasskeyRecord, PasskeyUse
from ._audit_rules import event_problem, is_valid_ts

GENESIS_PREV = "0" * 64
"""The `prev` of record 0."""

DAY_FILE_SUFFIX = ".jsonl"

FailureKind = Literal[
    "missing_newline",
    "bad_json",
    "bad_record",
    "seq_gap",
    "hash_mismatch",
    "bad_reference",
    "bad_recovery",
    "bad_break",
    "bad_pin",
]
"""Kinds of chain failure that a `break` record can name (04-audit "Verifier")."""

Verdict = Literal["approved", "refused", "expired", "requester_gone", "abandoned"]
"""`abandoned`: brokerd, starting, closes an ask left pending when it died (issue 22)."""
ResultStatus = Literal["ok", "tool_failed", "timeout", "runner_unavailable", "unsafe_target",
                       "pin_mismatch", "source_unavailable"]
"""`pin_mismatch`, `source_unavailable` (12): nothing ran, the taint is unchanged."""


class RecordJsonError(DecodeError):
    """The line is not strict JSON (the verifier's `bad_json`)."""


class RecordSchemaError(DecodeError):
    """The line is JSON but not a record (the verifier's `bad_record`)."""


# --------------------------------------------------------------------------
# Event payloads


@attrs.frozen(kw_only=True)
class GrantsSummary:
    ok: bool
    count: U64
    digest: str


@attrs.frozen(kw_only=True)
class Start:
    """brokerd begins serving."""

    version: str
    pid: U64
    grants: GrantsSummary


@attrs.frozen(kw_only=True)
class Stop:
    """Clean shutdown."""

    reason: str


@attrs.frozen(kw_only=True)
class GrantsChanged:
    """The grant set changed (event key ``grants``)."""

    ok: bool
    count: U64
    digest: str
    problem_count: U64


@attrs.frozen(kw_only=True)
class Peer:
    uid: U64
    pid: U64


@attrs.frozen(kw_only=True)
class Call:
    """A request arrived; the record's `seq` is the call id.

    This is the form written before issue 11, still accepted when read; brokerd
    now writes `BoundedCall` (a subclass), so `isinstance(event, Call)` holds
    for every call record.
    """

    session: str
    tool: str
    args: JsonObject
    peer: Peer


@attrs.frozen(kw_only=True)
class OmittedArgs:
    """Arguments too long to record (`[policy] max_args_bytes`): their size and hash."""

    bytes: U64
    """The UTF-8 length of the canonical arguments (compact JSON, keys sorted)."""
    sha256: str
    """The SHA-256 of those bytes, lowercase hex."""


@attrs.frozen(kw_only=True)
class BoundedCall(Call):
    """A call record as written since issue 11: `omitted` is null, or the size and
    hash of arguments left out as too long (then `args` is `{}`)."""

    omitted: OmittedArgs | None


@attrs.frozen(kw_only=True)
class OutcomeAllowed:
    """``{"allowed": {}}``"""


@attrs.frozen(kw_only=True)
class OutcomeAsk:
    """``{"ask": {"approval_id", "expires_at"}}``"""

    approval_id: U64
    expires_at: str


@attrs.frozen(kw_only=True)
class OutcomeDenied:
    """``{"denied": {"code", "reason"}}``"""

    code: DenialCode
    reason: str


DecisionOutcome = OutcomeAllowed | OutcomeAsk | OutcomeDenied
RedecisionOutcome = OutcomeAllowed | OutcomeDenied
register_tagged_union(
    DecisionOutcome, {"allowed": OutcomeAllowed, "ask": OutcomeAsk, "denied": OutcomeDenied}
)
register_tagged_union(RedecisionOutcome, {"allowed": OutcomeAllowed, "denied": OutcomeDenied})


@attrs.frozen(kw_only=True)
class DecisionRecord:
    """The decision, before anyone is answered (event key ``decision``)."""

    call: U64
    outcome: DecisionOutcome
    grant: str | None
    state: Taint
    grants_digest: str
    effective_args: JsonObject | None = None
    """12: the arguments sent, when they differ from the call's (left out when None)."""
    pin: str | None = None
    """12: the pin digest of an `mcp.*` call's server (left out when None)."""


@attrs.frozen(kw_only=True)
class Redecision:
    outcome: RedecisionOutcome
    grant: str | None
    state: Taint


@attrs.frozen(kw_only=True)
class ApprovalRecord:
    """The owner answered, the approval expired, or loopd went away."""

    call: U64
    approval_id: U64
    verdict: Verdict
    by: U64 | None
    reason: str | None
    redecision: Redecision | None
    passkey: PasskeyUse | None = None  # 11-approvals-web: the key is left out when None


@attrs.frozen(kw_only=True)
class OutputDigest:
    sha256: str
    bytes: U64


@attrs.frozen(kw_only=True)
class ResultRecord:
    """After the tool ran (or could not), before loopd is answered."""

    call: U64
    status: ResultStatus
    label: Label
    untrusted: bool
    state: Taint
    output: OutputDigest | None
    source: McpSource | CommandSource | None = None
    """12: what a tool source did (left out when None, as for every built-in)."""


@attrs.frozen(kw_only=True)
class Declassify:
    """The owner lowered a session's taint.  `from_` is written as ``from``."""

    session: str
    from_: Taint
    to: Taint
    by: U64
    reason: str


@attrs.frozen(kw_only=True)
class Recovery:
    """At start, a torn last line was closed off; this describes that line."""

    file: str
    line: U64
    bytes: U64
    sha256: str


@attrs.frozen(kw_only=True)
class BreakFirst:
    file: str
    line: U64
    kind: FailureKind


@attrs.frozen(kw_only=True)
class Break:
    """``brokerd serve --accept-break``: the owner accepted the failures before it."""

    first: BreakFirst
    failures: U64
    by: U64


Event = (
    Start
    | Stop
    | GrantsChanged
    | Call
    | BoundedCall
    | DecisionRecord
    | ApprovalRecord
    | ResultRecord
    | Declassify
    | Recovery
    | Break
    | PasskeyRecord
    | ApprovalAttempt
    | SourcesChanged
    | McpPinRecord
    | McpServerRecord
)

EVENT_TYPES: dict[str, type[Any]] = {
    "start": Start,
    "stop": Stop,
    "grants": GrantsChanged,
    "call": BoundedCall,
    "decision": DecisionRecord,
    "approval": ApprovalRecord,
    "result": ResultRecord,
    "declassify": Declassify,
    "recovery": Recovery,
    "break": Break,
    "passkey": PasskeyRecord,
    "approval_attempt": ApprovalAttempt,
    "sources": SourcesChanged,
    "mcp_pin": McpPinRecord,
    "mcp_server": McpServerRecord,
}
_KEY_OF_TYPE: dict[type[Any], str] = {cls: key for key, cls in EVENT_TYPES.items()}
_KEY_OF_TYPE[Call] = "call"


def event_type(key: str, payload: Any) -> type[Any] | None:
    """The class of an event key's payload: a call record without `omitted` is the
    older form (`Call`), still accepted."""
    if key == "call" and type(payload) is dict and "omitted" not in payload:
        return Call
    return EVENT_TYPES.get(key)


def event_key(event: Event) -> str:
    """The JSON key of an event: ``"start"``, ``"call"``, ..."""
    return _KEY_OF_TYPE[type(event)]


@attrs.frozen(kw_only=True)
class Record:
    """One line of the log."""

    seq: int
    ts: str
    prev: str
    event: Event


# `from` is a Python keyword: Declassify's field is `from_`, its key "from".
def _register_declassify() -> None:
    inner = make_dict_structure_fn(
        Declassify, converter, _cattrs_forbid_extra_keys=True, from_=override(rename="from")
    )

    def structure_declassify(value: Any, _: Any) -> Declassify:
        if type(value) is not dict:
            raise DecodeError(f"expected an object, found {type_word(value)}")
        return inner(value, Declassify)

    register_structure_hook(Declassify, structure_declassify)
    register_unstructure_hook(
        Declassify, make_dict_unstructure_fn(Declassify, converter, from_=override(rename="from"))
    )


_register_declassify()

omit_when_none(ApprovalRecord, "passkey")  # an approval without one is written as before
omit_when_none(DecisionRecord, "effective_args", "pin")  # 12: a built-in call's as before
omit_when_none(ResultRecord, "source")
omit_when_none(McpServerRecord, "egress", "egress_truncated")  # only on probed (issue 26)


# --------------------------------------------------------------------------
# Time stamps and day files

_DAY_FILE = re.compile(r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])\.jsonl")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def day_file_name(moment: datetime) -> str:
    """``YYYY-MM-DD.jsonl`` of the UTC day of `moment`."""
    if moment.tzinfo is None:
        raise ValueError("day_file_name needs an aware datetime")
    u = moment.astimezone(UTC)
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}{DAY_FILE_SUFFIX}"


def is_day_file_name(name: str) -> bool:
    """A day file: ``YYYY-MM-DD.jsonl`` with month 01..12 and day 01..31."""
    return _DAY_FILE.fullmatch(name) is not None


# --------------------------------------------------------------------------
# Lines


def line_hash(line: bytes) -> str:
    """SHA-256 (lowercase hex) of a record line; a trailing ``\\n`` is left out."""
    if line.endswith(b"\n"):
        line = line[:-1]
    return hashlib.sha256(line).hexdigest()


def _make_dump() -> Callable[[Any], str]:
    """Compact ASCII JSON; the C encoder made once when there is one."""
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # pragma: no cover - CPython always has it
        return json.JSONEncoder(
            ensure_ascii=True, separators=(",", ":"), allow_nan=False, check_circular=False
        ).encode
    encoder = c_make_encoder(
        None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False
    )

    def dump(value: Any) -> str:
        return "".join(encoder(value, 0))

    return dump


_dump_line = _make_dump()
_scan_once: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]
)
dump_json = _dump_line
"""Compact ASCII JSON text of a value (raises ValueError for NaN/Infinity)."""
scan_json = _scan_once
"""The C JSON scanner: (text, index) -> (value, end); not strict on its own."""


def record_to_json(record: Record) -> dict[str, Any]:
    """The JSON value of a record, keys in line order, args canonical."""
    event = record.event
    cls = type(event)
    payload = converter.unstructure(event, cls)
    if cls is Call or cls is BoundedCall:
        payload["args"] = canonical(payload["args"])
    elif cls is DecisionRecord and "effective_args" in payload:
        payload["effective_args"] = canonical(payload["effective_args"])
    return {"seq": record.seq, "ts": record.ts, "prev": record.prev, _KEY_OF_TYPE[cls]: payload}


def encode_record(record: Record) -> bytes:
    """The record's line, without the trailing ``\\n``."""
    return _dump_line(record_to_json(record)).encode("ascii")


def parse_record(line: bytes) -> Record:
    """A line (with or without its ``\\n``) -> `Record`, strictly.

    Raises `RecordJsonError` or `RecordSchemaError`.
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    try:
        return _parse_fast(line)
    except (_Slow, Mismatch, KeyError, ValueError, StopIteration, RecursionError):
        return _parse_strict(line)


class _Slow(InternalSignal):
    """The fast path does not accept the line; the strict path decides."""


_TOP_KEYS = ("seq", "ts", "prev")


def _top_fast(line: bytes) -> tuple[int, str, str, str, dict[str, Any]]:
    """(seq, ts, prev, event key, event JSON) of a line in its one form; raises
    on anything unusual (the strict path then decides)."""
    if not line.isascii() or b"\\ud" in line:  # surrogate escapes: strict path
        raise _Slow
    text = line.decode("ascii")
    value, end = _scan_once(text, 0)
    if end != len(text) or type(value) is not dict or len(value) != 4:
        raise _Slow
    # The one way of writing it (also folds away duplicate keys: then unequal).
    if _dump_line(value) != text:
        raise _Slow
    seq_key, ts_key, prev_key, key = value
    if (seq_key, ts_key, prev_key) != _TOP_KEYS:
        raise _Slow
    seq = value["seq"]
    ts = value["ts"]
    prev = value["prev"]
    if (
        type(seq) is not int
        or not 0 <= seq <= U64_MAX
        or type(ts) is not str
        or not is_valid_ts(ts)
        or type(prev) is not str
        or _HEX64.fullmatch(prev) is None
    ):
        raise _Slow
    return seq, ts, prev, key, value[key]


def _parse_fast(line: bytes) -> Record:
    """The common case, for valid lines; raises on anything unusual.

    It accepts a subset of what `_parse_strict` accepts (tests compare them).
    """
    seq, ts, prev, key, payload = _top_fast(line)
    fast = _FAST_LEGACY_CALL if event_type(key, payload) is Call else _FAST_EVENT[key]
    event = fast(payload)
    if event_problem(key, payload) is not None:
        raise _Slow
    record = Record(seq=seq, ts=ts, prev=prev, event=event)
    if encode_record(record) != line:  # fields in another order
        raise _Slow
    return record


def _parse_strict(line: bytes) -> Record:
    """Every rule, one at a time, with a message that says which failed."""
    # Step 1: strict JSON (UTF-8, no duplicate keys, depth, no NaN, surrogates).
    try:
        value: Any = loads_value(line)
    except DecodeError as exc:
        raise RecordJsonError(exc.message) from None
    if type(value) is not dict:
        raise RecordSchemaError(f"expected an object, found {type_word(value)}")
    # Step 2: the one way of writing it: ASCII, compact, strings and numbers
    # as the encoder writes them.
    if not line.isascii():
        raise RecordSchemaError("the line holds bytes that are not ASCII")
    try:
        text = _dump_line(value)
    except ValueError:
        raise RecordJsonError("a number out of range (NaN or Infinity)") from None
    if text.encode("ascii") != line:
        raise RecordSchemaError("the record is not written in its one compact form")
    # Step 3: the top level: seq, ts, prev and one event key, in that order.
    keys = list(value)
    if len(keys) != 4 or tuple(keys[:3]) != _TOP_KEYS:
        shown = ", ".join(json.dumps(k) for k in keys)
        raise RecordSchemaError(
            f'expected the keys "seq", "ts", "prev" and one event key, in that order; '
            f"found {shown}"
        )
    key = keys[3]
    cls = event_type(key, value[key])
    if cls is None:
        raise RecordSchemaError(f"unknown event {json.dumps(key)}", path="$")
    seq = value["seq"]
    if type(seq) is not int or not 0 <= seq <= U64_MAX:
        raise RecordSchemaError(
            f"expected an unsigned 64-bit integer, found {type_word(seq)}", path="$.seq"
        )
    ts = value["ts"]
    if type(ts) is not str or not is_valid_ts(ts):
        raise RecordSchemaError("expected a time YYYY-MM-DDTHH:MM:SS.ffffffZ", path="$.ts")
    prev = value["prev"]
    if type(prev) is not str or _HEX64.fullmatch(prev) is None:
        raise RecordSchemaError("expected 64 lowercase hex digits", path="$.prev")
    # Step 4: the event, through the strict converter (the authority).
    try:
        event: Any = structure(value[key], cls)
    except DecodeError as exc:
        path = f"$.{key}" + (exc.path[1:] if exc.path else "")
        raise RecordSchemaError(exc.message, path=path) from None
    # Step 5: rules of single fields that the types alone do not say.
    problem = event_problem(key, value[key])
    if problem is not None:
        raise RecordSchemaError(problem[1], path=f"$.{key}.{problem[0]}")
    # Step 6: the fields of every object in the order they are written in.
    record = Record(seq=seq, ts=ts, prev=prev, event=event)
    if encode_record(record) != line:
        raise RecordSchemaError(
            "the fields are not in the order records are written in", path=f"$.{key}"
        )
    return record


# The compiled checkers (a faster twin of the converter; see _fastcheck):
# one set builds the events, the other only checks them.
_TAGGED_UNIONS: dict[Any, dict[str, type[Any]]] = {
    DecisionOutcome: {"allowed": OutcomeAllowed, "ask": OutcomeAsk, "denied": OutcomeDenied},
    RedecisionOutcome: {"allowed": OutcomeAllowed, "denied": OutcomeDenied},
}
_STRICT_EVENTS = frozenset({"sources", "mcp_pin", "mcp_server"})
"""Rare events (12) that only the strict path parses."""
_FAST_EVENT = compile_checkers(
    {**{k: v for k, v in EVENT_TYPES.items() if k not in _STRICT_EVENTS}, "legacy call": Call},
    tagged=_TAGGED_UNIONS, json_names={(Declassify, "from_"): "from"},
    slow=frozenset({McpSource | CommandSource | None}),
)
_FAST_LEGACY_CALL = _FAST_EVENT.pop("legacy call")
