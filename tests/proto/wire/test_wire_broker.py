"""broker.sock messages (boxmaker/proto/wire/_wire_broker.py): every message a
broker may answer round-trips, a result's output matches its status, and a
frame is the exact 02-wire envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto._convert import U64, InvalidValue
from boxmaker.proto._errors import DecodeError
from boxmaker.proto.wire._wire import DENIAL_CODES, DENIAL_RUNBOOKS
from boxmaker.proto.wire._wire_broker import (
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

ids = st.integers(0, 2**64 - 1)
names = st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True)
json_objects: Any = st.dictionaries(
    st.text(max_size=5),
    st.recursive(st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3), max_leaves=5),
    max_size=4)


@given(request_id=ids, session=names, tool=st.sampled_from(["read_file", "echo", "x_y"]),
       args=json_objects)
def test_requests_round_trip_in_the_envelope(request_id: int, session: str, tool: str,
                                             args: dict[str, Any]) -> None:
    request = BrokerRequest(id=request_id, call=Call(session=session, tool=tool, args=args))
    body = encode_broker_request(request)
    assert json.loads(body) == {"v": 1, "id": request_id,
                                "call": {"session": session, "tool": tool, "args": args}}
    assert decode_broker_request(body) == request


answers = st.one_of(
    st.builds(Pending, approval_id=ids.map(U64), expires_at=st.just("2026-12-01T10:00:00.000000Z"),
              grant=names),
    st.builds(Result, status=st.just("ok"), output=json_objects,
              label=st.sampled_from(["public", "private", "secret"]), untrusted=st.booleans()),
    st.builds(Result, status=st.just("timeout"), output=st.none(),
              label=st.sampled_from(["public", "secret"]), untrusted=st.booleans()),
    st.builds(Result, status=st.just("tool_failed"),
              output=st.builds(lambda c, m: {"error": {"code": c, "message": m}},
                               st.text(max_size=8), st.text(max_size=20)),
              label=st.just("private"), untrusted=st.booleans()),
    st.sampled_from(DENIAL_CODES).flatmap(lambda code: st.builds(
        Denied, code=st.just(code), reason=st.text(max_size=30), grant=st.none() | names,
        runbook=st.just(DENIAL_RUNBOOKS[code]))),
)


@given(answer_id=ids, answer=answers)
def test_answers_round_trip(answer_id: int, answer: Any) -> None:
    body = encode_broker_answer(answer_id, answer)
    frame = json.loads(body)
    assert frame["id"] == answer_id and len(frame) == 2
    assert decode_broker_answer(body) == (answer_id, answer)


def test_a_result_output_must_match_its_status() -> None:
    with pytest.raises(InvalidValue, match="null when status is timeout"):
        Result(status="timeout", output={}, label="public", untrusted=False)
    with pytest.raises(InvalidValue, match="must be an object"):
        Result(status="ok", output=None, label="public", untrusted=False)
    for output in ({}, {"error": "x"}, {"error": {"code": "c"}},
                   {"error": {"code": 1, "message": "m"}},
                   {"error": {"code": "c", "message": "m"}, "more": 1}):
        with pytest.raises(InvalidValue, match="tool_failed output"):
            Result(status="tool_failed", output=output, label="public", untrusted=False)


@pytest.mark.parametrize("result", [
    {"status": "timeout", "output": {}, "label": "public", "untrusted": False},
    {"status": "ok", "output": None, "label": "public", "untrusted": False},
    {"status": "tool_failed", "output": {"x": 1}, "label": "public", "untrusted": False},
    {"status": "ok", "output": {}, "label": "top", "untrusted": False},
    {"status": "ok", "output": {}, "label": "public", "untrusted": False, "extra": 1},
])
def test_a_bad_result_does_not_decode(result: dict[str, Any]) -> None:
    good = {"status": "ok", "output": {}, "label": "public", "untrusted": False}
    assert decode_broker_answer(json.dumps({"id": 1, "result": good}))[0] == 1
    with pytest.raises(DecodeError):
        decode_broker_answer(json.dumps({"id": 1, "result": result}))


def test_a_denial_runbook_must_be_a_pointer() -> None:
    with pytest.raises(InvalidValue, match="runbook"):
        Denied(code="no_grant", reason="r", grant=None, runbook="see the docs")


def test_a_call_session_must_be_a_name() -> None:
    with pytest.raises(DecodeError):
        decode_broker_request(b'{"v":1,"id":1,"call":{"session":"S 1","tool":"echo","args":{}}}')
    with pytest.raises(DecodeError):
        decode_broker_request(b'{"v":1,"id":1,"call":{"session":"s","tool":"echo","args":[]}}')
