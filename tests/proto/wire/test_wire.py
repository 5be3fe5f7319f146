"""The messages of 02-wire against fixtures/wire/ (valid) and fixtures/wire/bad/."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._convert import U64, JsonObject
from boxmaker.proto._errors import DecodeError
from boxmaker.proto._taint import Taint
from boxmaker.proto.wire._wire import (
    DENIAL_CODES,
    DENIAL_RUNBOOKS,
    ERROR_CODES,
    ERROR_RUNBOOKS,
    BadVersion,
    ErrorAnswer,
    Ok,
    error_answer,
    error_frame,
    expect,
    format_ts,
    is_name,
    is_ts,
    parse_ts,
    peek_id,
    ts_from_unix,
)
from boxmaker.proto.wire._wire_admin import (
    ADMIN_ANSWER_TAGS,
    ADMIN_REQUEST_TAGS,
    AdminRequest,
    Approval,
    ApproveRequest,
    decode_admin_answer,
    decode_admin_request,
    encode_admin_answer,
    encode_admin_request,
)
from boxmaker.proto.wire._wire_broker import (
    BROKER_ANSWER_TAGS,
    BROKER_REQUEST_TAGS,
    BrokerRequest,
    Call,
    Denied,
    Pending,
    Result,
    decode_broker_answer,
    decode_broker_request,
    encode_broker_answer,
    encode_broker_request,
)
from boxmaker.proto.wire._wire_loop import (
    EVENT_TAGS,
    LOOP_FRAME_TAGS,
    LOOP_REQUEST_TAGS,
    MAX_SAY_BYTES,
    HistoryMessage,
    LoopRequest,
    SayRequest,
    TextEvent,
    ToolCallEvent,
    decode_loop_frame,
    decode_loop_request,
    encode_loop_frame,
    encode_loop_request,
)

WIRE = Path(__file__).resolve().parents[3] / "fixtures" / "wire"
VALID = sorted(WIRE.glob("*.json"))
BAD = sorted((WIRE / "bad").glob("*.json"))


def _round_broker_request(body: bytes) -> bytes:
    return encode_broker_request(decode_broker_request(body))


def _round_admin_request(body: bytes) -> bytes:
    return encode_admin_request(decode_admin_request(body))


def _round_loop_request(body: bytes) -> bytes:
    return encode_loop_request(decode_loop_request(body))


def _round_broker_answer(body: bytes) -> bytes:
    return encode_broker_answer(*decode_broker_answer(body))


def _round_admin_answer(body: bytes) -> bytes:
    return encode_admin_answer(*decode_admin_answer(body))


def _round_loop_frame(body: bytes) -> bytes:
    return encode_loop_frame(*decode_loop_frame(body))


# fixture name prefix -> decode then encode again
ROUND_TRIP: dict[str, Callable[[bytes], bytes]] = {
    "broker-request": _round_broker_request,
    "broker-answer": _round_broker_answer,
    "admin-request": _round_admin_request,
    "admin-answer": _round_admin_answer,
    "loop-request": _round_loop_request,
    "loop-answer": _round_loop_frame,
    "loop-event": _round_loop_frame,
}
DECODE: dict[tuple[str, str], Callable[[bytes], object]] = {
    ("broker", "request"): decode_broker_request,
    ("broker", "answer"): decode_broker_answer,
    ("admin", "request"): decode_admin_request,
    ("admin", "answer"): decode_admin_answer,
    ("loop", "request"): decode_loop_request,
    ("loop", "answer"): decode_loop_frame,
}
# JSON objects whose keys are free (any JSON object): tool arguments and outputs
# (and, for passkeys, the browser's credential and creation options: the webauthn
# package checks them; for tool-source tools, the pinned schema the model sees)
FREE_FORM_KEYS = frozenset({"args", "output", "credential", "creation", "parameters", "raw",
                            "suggested_kinds", "kinds"})
# Fields a request may leave out (newer than the format; written only when not null)
OPTIONAL_FIELDS = frozenset({(("approve",), "assertion"), (("declassify",), "assertion"),
                             (("mcp_pin",), "assertion"),
                             (("event", "tool_result"), "exit"),
                             (("status",), "mcp_tools"), (("grants_report",), "dormant"),
                             (("mcp_status",), "server"),
                             (("mcp_status", "servers", 0), "tools")})


def _kind(path: Path) -> str:
    return "-".join(path.stem.split("-")[:2])


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


PathKey = tuple[str | int, ...]


def _objects(value: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, dict[str, Any]]]:
    """Every JSON object in `value`, with its path, outside free-form objects."""
    if isinstance(value, dict):
        if any(key in FREE_FORM_KEYS for key in path if isinstance(key, str)):
            return
        yield path, value
        for key, item in value.items():
            yield from _objects(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _objects(item, (*path, index))


def _at(document: Any, path: PathKey) -> Any:
    for key in path:
        document = document[key]
    return document


def _body(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


# --- the fixture set ---------------------------------------------------------------


def test_fixture_directories_hold_files() -> None:
    assert len(VALID) >= 40
    assert len(BAD) >= 60
    assert {_kind(p) for p in VALID} == set(ROUND_TRIP)


def test_every_message_shape_has_a_valid_fixture() -> None:
    seen: dict[str, set[str]] = {kind: set() for kind in ROUND_TRIP}
    events: set[str] = set()
    for path in VALID:
        document = json.loads(path.read_bytes())
        keys = set(document) - {"v", "id"}
        seen[_kind(path)] |= keys
        if "event" in document:
            events |= set(document["event"])
    assert seen["broker-request"] == set(BROKER_REQUEST_TAGS)
    assert seen["broker-answer"] == set(BROKER_ANSWER_TAGS)
    assert seen["admin-request"] == set(ADMIN_REQUEST_TAGS)
    assert seen["admin-answer"] == set(ADMIN_ANSWER_TAGS)
    assert seen["loop-request"] == set(LOOP_REQUEST_TAGS)
    assert seen["loop-answer"] | seen["loop-event"] == set(LOOP_FRAME_TAGS)
    assert events == set(EVENT_TAGS)


@pytest.mark.parametrize("path", VALID, ids=_ids(VALID))
def test_valid_fixture_round_trips(path: Path) -> None:
    body = path.read_bytes()
    again = ROUND_TRIP[_kind(path)](body)
    assert json.loads(again) == json.loads(body)
    # encoding is compact and deterministic: a second round gives the same bytes
    assert ROUND_TRIP[_kind(path)](again) == again


@pytest.mark.parametrize("path", VALID, ids=_ids(VALID))
def test_an_unknown_field_at_any_depth_is_refused(path: Path) -> None:
    document = json.loads(path.read_bytes())
    round_trip = ROUND_TRIP[_kind(path)]
    accepted: list[PathKey] = []
    checked = 0
    for where, _obj in _objects(document):
        changed = copy.deepcopy(document)
        _at(changed, where)["zz_unknown"] = 0
        checked += 1
        try:
            round_trip(_body(changed))
        except BadVersion:  # pragma: no cover - would be a wrong classification
            accepted.append(where)
        except DecodeError:
            continue
        else:
            accepted.append(where)
    assert checked >= 2
    assert accepted == [], f"an unknown field was accepted at {accepted}"


@pytest.mark.parametrize("path", VALID, ids=_ids(VALID))
def test_a_missing_field_at_any_depth_is_refused(path: Path) -> None:
    document = json.loads(path.read_bytes())
    round_trip = ROUND_TRIP[_kind(path)]
    accepted: list[tuple[PathKey, str]] = []
    for where, obj in _objects(document):
        for key in obj:
            if (where, key) in OPTIONAL_FIELDS:
                continue
            changed = copy.deepcopy(document)
            del _at(changed, where)[key]
            try:
                round_trip(_body(changed))
            except DecodeError:
                continue
            accepted.append((where, key))
    assert accepted == [], f"a missing field was accepted: {accepted}"


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("broker-request-call", ("call", "args")),
        ("broker-answer-result-ok", ("result", "output")),
        ("admin-answer-approval", ("approval", "args")),
        ("admin-answer-approvals", ("approvals", "items", 1, "args")),
        ("loop-event-tool-call", ("event", "tool_call", "args")),
    ],
)
def test_free_form_objects_take_any_field(name: str, where: PathKey) -> None:
    """Tool arguments and outputs are any JSON object (parsed against the tool later)."""
    document = json.loads((WIRE / f"{name}.json").read_bytes())
    _at(document, where)["anything"] = {"at": ["all", 1, None]}
    again = ROUND_TRIP[_kind(WIRE / f"{name}.json")](_body(document))
    assert json.loads(again) == document


# --- bad fixtures -------------------------------------------------------------------


def _bad_frame(spec: dict[str, Any]) -> bytes:
    if "frame_hex" in spec:
        return bytes.fromhex(spec["frame_hex"])
    frame: str = spec["frame"]
    return frame.encode("utf-8")


@pytest.mark.parametrize("path", BAD, ids=_ids(BAD))
def test_bad_fixture_is_refused(path: Path) -> None:
    spec = json.loads(path.read_bytes())
    assert set(spec) in (
        {"socket", "direction", "frame", "error", "id", "path", "why"},
        {"socket", "direction", "frame_hex", "error", "id", "path", "why"},
    )
    assert path.stem.startswith(f"{spec['socket']}-{spec['direction']}-")
    frame = _bad_frame(spec)
    with pytest.raises(DecodeError) as caught:
        DECODE[spec["socket"], spec["direction"]](frame)
    error = caught.value
    if spec["error"] == "bad_version":
        assert isinstance(error, BadVersion)
        assert error.id == spec["id"]
    else:
        assert spec["error"] == "bad_frame"
        assert not isinstance(error, BadVersion)
        assert peek_id(frame) == spec["id"]
    if spec["path"] is not None:
        assert error.path == spec["path"]
    # the message quotes nothing of the peer's bytes unescaped, and stays short
    assert str(error).isprintable()
    assert len(str(error)) < 600


@pytest.mark.parametrize("path", BAD, ids=_ids(BAD))
def test_bad_fixture_gets_a_decodable_error_frame(path: Path) -> None:
    """What a server answers to each bad frame decodes on the client side."""
    spec = json.loads(path.read_bytes())
    frame = _bad_frame(spec)
    code = spec["error"]
    body = error_frame(peek_id(frame), code, "the frame does not decode", ERROR_RUNBOOKS[code])
    answer_id, answer = DECODE[spec["socket"], "answer"](body)  # type: ignore[misc]
    assert answer_id == spec["id"]
    assert answer == ErrorAnswer(
        code=code, message="the frame does not decode", runbook="docs/runbook.md#bad-frame"
    )


# --- envelopes and helpers ------------------------------------------------------------

SPEC_ANCHORS = {
    "brokerd-start-failed",
    "brokerd-listener-lost",
    "audit-locked",
    "audit-chain-broken",
    "audit-unavailable",
    "grants-missing",
    "grants-invalid",
    "broker-state-damaged",
    "runner-unavailable",
    "bad-frame",
    "forbidden-peer",
    "loopd-start-failed",
    "inference-unavailable",
    "inference-mismatch",
    "core-unreadable",
    "broker-unavailable",
    "inferproxy-start-failed",
    "daemon-unreachable",
    "passkey-required",
    "approvals-exhausted",  # issue 11 amends 02-wire's tables
    "too-many-pending",  # issue 22 item 9 amends them again
    "sources-invalid",  # 12-tool-sources "Wire changes"
    "source-unpinned",
    "pin-mismatch",
    "source-unavailable",
}


def test_error_table_matches_the_spec() -> None:
    assert set(ERROR_RUNBOOKS) == set(ERROR_CODES)
    # 12-tool-sources: source_unavailable, no_such_server, no_such_probe, sources_invalid
    assert len(ERROR_CODES) == 18
    assert set(DENIAL_RUNBOOKS) == set(DENIAL_CODES)
    assert len(DENIAL_CODES) == 16  # 12: sources_invalid, source_unpinned, pin_mismatch
    for pointer in [*ERROR_RUNBOOKS.values(), *DENIAL_RUNBOOKS.values()]:
        if pointer is not None:
            match = re.fullmatch(r"docs/runbook\.md#([a-z0-9-]+)", pointer)
            assert match is not None and match.group(1) in SPEC_ANCHORS
    assert ERROR_RUNBOOKS["bad_version"] == "docs/runbook.md#bad-frame"
    assert ERROR_RUNBOOKS["no_such_approval"] is None
    assert error_answer("busy", "a turn is running").runbook is None
    assert error_answer("forbidden", "no").runbook == "docs/runbook.md#forbidden-peer"


def test_error_frame_with_and_without_id() -> None:
    body = error_frame(7, "audit_unavailable", "m", "docs/runbook.md#audit-unavailable")
    assert json.loads(body) == {
        "id": 7,
        "error": {
            "code": "audit_unavailable",
            "message": "m",
            "runbook": "docs/runbook.md#audit-unavailable",
        },
    }
    assert body.startswith(b'{"id":7,"error":')
    assert json.loads(error_frame(None, "bad_frame", "m", None))["id"] is None
    for decode in (decode_broker_answer, decode_admin_answer, decode_loop_frame):
        assert decode(body)[0] == 7


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"v":1,"id":41,"call":{}}', 41),
        (b'{"id":0}', 0),
        (b'{"id":18446744073709551615,"x":[}', None),
        (b'{"id":18446744073709551615}', 18446744073709551615),
        (b'{"id":18446744073709551616}', None),
        (b'{"id":-1}', None),
        (b'{"id":true}', None),
        (b'{"id":1.0}', None),
        (b'{"id":"1"}', None),
        (b'{"id":1,"id":2}', None),
        (b"[1]", None),
        (b"\xff", None),
        (b"", None),
    ],
)
def test_peek_id(body: bytes, expected: int | None) -> None:
    assert peek_id(body) == expected


def test_bad_version_is_a_decode_error_with_the_id() -> None:
    with pytest.raises(BadVersion) as caught:
        decode_admin_request(b'{"v":2,"id":9,"anything":{"new":"shape"}}')
    assert isinstance(caught.value, DecodeError)
    assert caught.value.id == 9
    assert caught.value.path == "$.v"
    with pytest.raises(BadVersion) as caught:
        decode_loop_request(b'{"v":99999999999999999999,"id":-3}')
    assert caught.value.id is None
    assert "99999999999999999999" not in str(caught.value)


def test_requests_encode_in_envelope_order() -> None:
    request = BrokerRequest(
        id=U64(41),
        call=Call(session="default", tool="read_file", args=JsonObject({"path": "/x"})),
    )
    body = encode_broker_request(request)
    assert body == (
        b'{"v":1,"id":41,"call":{"session":"default","tool":"read_file","args":{"path":"/x"}}}'
    )
    assert decode_broker_request(body) == request
    admin = AdminRequest(id=U64(3), body=ApproveRequest(approval_id=U64(482913)))
    assert encode_admin_request(admin) == b'{"v":1,"id":3,"approve":{"approval_id":482913}}'
    loop = LoopRequest(id=U64(5), body=SayRequest(conversation="default", text="hi"))
    assert decode_loop_request(encode_loop_request(loop)) == loop


def test_events_encode_inside_their_tag() -> None:
    body = encode_loop_frame(5, TextEvent(delta="\x1b[2J"))
    assert body == b'{"id":5,"event":{"text":{"delta":"\\u001b[2J"}}}'
    assert decode_loop_frame(body) == (5, TextEvent(delta="\x1b[2J"))


def test_non_ascii_is_sent_as_utf8() -> None:
    body = encode_loop_frame(5, TextEvent(delta="été \u2014 \U0001f600"))
    assert "été \u2014 \U0001f600".encode() in body


def test_encoding_refuses_our_own_mistakes() -> None:
    pending = Pending(approval_id=U64(1), expires_at="2026-11-29T07:10:00.000000Z", grant="g")
    with pytest.raises(ValueError, match="u64"):
        encode_broker_answer(None, pending)
    with pytest.raises(ValueError, match="u64"):
        encode_broker_answer(2**64, pending)
    with pytest.raises(ValueError, match="u64"):
        encode_broker_answer(True, pending)
    with pytest.raises(TypeError, match="not a message of this socket"):
        encode_broker_answer(1, Ok())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a message of this socket"):
        encode_admin_answer(1, pending)  # type: ignore[arg-type]
    assert (
        json.loads(
            encode_broker_answer(None, ErrorAnswer(code="bad_frame", message="m", runbook=None))
        )["id"]
        is None
    )


def test_constructing_a_bad_message_is_our_bug_not_a_decode_error() -> None:
    cases: list[Callable[[], object]] = [
        lambda: Call(session="Default", tool="t", args=JsonObject({})),
        lambda: Call(session="default", tool="t" * 1025, args=JsonObject({})),
        lambda: Pending(approval_id=U64(1), expires_at="2026-11-29", grant="g"),
        lambda: Result(status="timeout", output=JsonObject({}), label="public", untrusted=False),
        lambda: Denied(code="refused", reason="r", grant=None, runbook="see the docs"),
        lambda: ToolCallEvent(call_id="t", tool="x", args=None, raw_args=None),
        lambda: SayRequest(conversation="default", text=""),
        lambda: HistoryMessage(
            role="user",
            content=None,
            tool_calls=None,
            tool_call_id=None,
            interrupted=False,
            ts="2026-11-29T07:00:00.000000Z",
        ),
    ]
    for make in cases:
        with pytest.raises(ValueError) as caught:
            make()
        assert not isinstance(caught.value, DecodeError)


def test_say_text_is_measured_in_utf8_bytes() -> None:
    four_byte = "\U0001f600"
    assert SayRequest(conversation="c", text=four_byte * (MAX_SAY_BYTES // 4)).text
    with pytest.raises(ValueError, match="bytes"):
        SayRequest(conversation="c", text=four_byte * (MAX_SAY_BYTES // 4) + "a")
    body = b'{"v":1,"id":1,"say":{"conversation":"c","text":"%s"}}' % (b"a" * (MAX_SAY_BYTES + 1))
    with pytest.raises(DecodeError, match="1 to 65536 bytes"):
        decode_loop_request(body)


def test_tool_is_measured_in_characters() -> None:
    call = Call(session="s", tool="\u00e9" * 1024, args=JsonObject({}))
    body = encode_broker_request(BrokerRequest(id=U64(1), call=call))
    assert decode_broker_request(body).call.tool == "\u00e9" * 1024
    assert Call(session="s", tool="", args=JsonObject({})).tool == ""


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("0", True),
        ("a-", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("", False),
        ("-a", False),
        ("A", False),
        ("a_b", False),
        ("a\n", False),
        ("\u0661", False),
        ("a.b", False),
    ],
)
def test_name_grammar(name: str, ok: bool) -> None:
    assert is_name(name) is ok


def test_expect() -> None:
    pending = Pending(approval_id=U64(1), expires_at="2026-11-29T07:10:00.000000Z", grant="g")
    assert expect(Pending, pending) is pending
    with pytest.raises(DecodeError, match="expected Result, found Pending"):
        expect(Result, pending)


def test_approval_state_is_the_shared_taint() -> None:
    _id, answer = decode_admin_answer((WIRE / "admin-answer-approval.json").read_bytes())
    assert isinstance(answer, Approval)
    assert answer.state == Taint(label="public", untrusted=False)


# --- timestamps -------------------------------------------------------------------------


def test_format_and_parse_ts() -> None:
    moment = dt.datetime(2026, 11, 29, 7, 10, 0, tzinfo=dt.UTC)
    assert format_ts(moment) == "2026-11-29T07:10:00.000000Z"
    assert parse_ts("2026-11-29T07:10:00.000000Z") == moment
    paris = dt.timezone(dt.timedelta(hours=1))
    assert format_ts(dt.datetime(2026, 11, 29, 8, 10, 0, 5, tzinfo=paris)) == (
        "2026-11-29T07:10:00.000005Z"
    )
    assert ts_from_unix(0) == "1970-01-01T00:00:00.000000Z"
    with pytest.raises(ValueError, match="aware"):
        format_ts(dt.datetime(2026, 11, 29, 7, 10, 0))


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T07:10:00Z",
        "2026-11-29T07:10:00.000000",
        "2026-11-29 07:10:00.000000Z",
        "2026-11-29T07:10:00.000000+00:00",
        "2026-11-29T07:10:00.0000000Z",
        "2026-13-01T00:00:00.000000Z",
        "2026-02-29T00:00:00.000000Z",
        "2026-11-29T24:00:00.000000Z",
        "2026-11-29T07:10:00.000000z",
        " 2026-11-29T07:10:00.000000Z",
        "2026-11-29T07:10:00.000000Z\n",
        "",
    ],
)
def test_parse_ts_refuses_other_forms(text: str) -> None:
    assert not is_ts(text)
    with pytest.raises(DecodeError):
        parse_ts(text)


@settings(max_examples=200)
@given(st.datetimes(timezones=st.just(dt.UTC), min_value=dt.datetime(1, 1, 1)))
def test_ts_round_trip(moment: dt.datetime) -> None:
    text = format_ts(moment)
    assert is_ts(text)
    assert parse_ts(text) == moment


@settings(max_examples=500)
@given(st.tuples(*[st.integers(0, 99)] * 7, st.integers(0, 999999)))
def test_is_ts_accepts_what_strptime_accepts(parts: tuple[int, ...]) -> None:
    """The digits read by position accept exactly the real moments strptime accepts
    (month 0 or 13, day 31 of a short month, hour 24, second 60 all refused)."""
    century, year, month, day, hour, minute, second, micro = parts
    text = (f"{century:02}{year:02}-{month:02}-{day:02}T{hour:02}:{minute:02}:"
            f"{second:02}.{micro:06}Z")
    try:
        expected: dt.datetime | None = dt.datetime.strptime(
            text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
    except ValueError:
        expected = None
    assert is_ts(text) == (expected is not None)
    if expected is not None:
        assert parse_ts(text) == expected


def test_history_answer_carries_what_loopd_stores() -> None:
    _id, frame = decode_loop_frame((WIRE / "loop-answer-history.json").read_bytes())
    messages = frame.messages  # type: ignore[union-attr]
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[1].tool_calls[0].function.name == "read_file"
    assert messages[-1].interrupted and messages[-1].content is None


def test_wire_modules_do_no_io() -> None:
    """The wire layer is pure: importing it pulls in no event loop (trio, asyncio)."""
    code = (
        "import sys\n"
        "import boxmaker.proto.wire._wire_admin, boxmaker.proto.wire._wire_broker\n"
        "import boxmaker.proto.wire._wire_loop\n"
        "bad = sorted(m for m in ('trio', 'asyncio') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""
