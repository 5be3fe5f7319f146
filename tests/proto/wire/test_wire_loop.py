"""loop.sock messages (boxmaker/proto/wire/_wire_loop.py): the invariants of a
tool_call event and of a history message, and the frames round-trip
(the size and depth bounds are in test_wire_loop_bounds.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto._convert import U64, InvalidValue
from boxmaker.proto._errors import DecodeError
from boxmaker.proto.wire._wire_loop import (
    MAX_ARGS_BYTES,
    MAX_ARGS_DEPTH,
    MAX_SAY_BYTES,
    Done,
    FunctionCall,
    HistoryMessage,
    LoopRequest,
    MessageToolCall,
    SayRequest,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
    args_problem,
    decode_loop_frame,
    decode_loop_request,
    encode_loop_frame,
    encode_loop_request,
)

TS = "2026-12-01T10:00:00.000000Z"


def test_a_tool_call_carries_args_or_raw_args_never_both() -> None:
    ToolCallEvent(call_id="c1", tool="echo", args={"text": "x"}, raw_args=None)
    ToolCallEvent(call_id="c1", tool="echo", args=None, raw_args="{not json")
    for args, raw in (({"a": 1}, "{}"), (None, None)):
        with pytest.raises(InvalidValue, match="exactly one"):
            ToolCallEvent(call_id="c1", tool="echo", args=args, raw_args=raw)


def test_args_problem_names_depth_and_size() -> None:
    deep: dict[str, Any] = {}
    for _ in range(MAX_ARGS_DEPTH):
        deep = {"a": deep}
    problem = args_problem(deep)
    assert problem is not None and "deep" in problem
    big = {"a": "x" * MAX_ARGS_BYTES}
    problem = args_problem(big)
    assert problem is not None and "bytes" in problem
    assert args_problem({"a": [1, {"b": None}]}) is None


def _message(role: str, **over: Any) -> HistoryMessage:
    fields: dict[str, Any] = dict(role=role, content="hi", tool_calls=None, tool_call_id=None,
                                  interrupted=False, ts=TS)
    fields.update(over)
    return HistoryMessage(**fields)


CALL = MessageToolCall(id="c1", type="function", function=FunctionCall(name="echo",
                                                                       arguments="{}"))


def test_history_messages_hold_their_role_rules() -> None:
    _message("user")
    _message("system")
    _message("assistant", content=None, tool_calls=[CALL])
    _message("assistant", content=None)
    _message("tool", tool_call_id="c1")
    with pytest.raises(InvalidValue, match="tool_calls must be null"):
        _message("user", tool_calls=[CALL])
    with pytest.raises(InvalidValue, match="tool_call_id"):
        _message("tool")
    with pytest.raises(InvalidValue, match="tool_call_id"):
        _message("user", tool_call_id="c1")
    with pytest.raises(InvalidValue, match="non-empty"):
        _message("assistant", tool_calls=[])
    with pytest.raises(InvalidValue, match="content must be a string"):
        _message("user", content=None)


@given(request_id=st.integers(0, 2**64 - 1),
       text=st.text(min_size=1, max_size=50).filter(lambda t: len(t.encode("utf-8",
                                                                            "surrogatepass"))
                                                      <= MAX_SAY_BYTES))
def test_say_requests_round_trip(request_id: int, text: str) -> None:
    request = LoopRequest(id=request_id, body=SayRequest(conversation="c-1", text=text))
    assert decode_loop_request(encode_loop_request(request)) == request


def test_say_text_is_one_to_max_bytes() -> None:
    with pytest.raises(InvalidValue):
        SayRequest(conversation="c", text="")
    with pytest.raises(DecodeError):
        decode_loop_request(json.dumps({"v": 1, "id": 1, "say": {"conversation": "c",
                                                                 "text": ""}}))


frames = st.one_of(
    st.builds(TextEvent, delta=st.text(max_size=30)),
    st.builds(ToolCallEvent, call_id=st.text(max_size=10), tool=st.just("read_file"),
              args=st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
              raw_args=st.none()),
    st.builds(ToolResultEvent, call_id=st.text(max_size=10), tool=st.just("echo"),
              status=st.sampled_from(["ok", "tool_failed", "timeout"]),
              bytes=st.integers(0, 2**64 - 1).map(U64),
              label=st.sampled_from(["public", "private", "secret"]), untrusted=st.booleans()),
    st.builds(Done, finish=st.sampled_from(["stop", "length", "max_rounds"]),
              rounds=st.integers(0, 100).map(U64),
              usage=st.builds(Usage, prompt_tokens=st.integers(0, 10**6).map(U64),
                              completion_tokens=st.integers(0, 10**6).map(U64))),
)


@given(frame_id=st.integers(0, 2**64 - 1), frame=frames)
def test_frames_round_trip_events_inside_their_tag(frame_id: int, frame: Any) -> None:
    body = encode_loop_frame(frame_id, frame)
    decoded = json.loads(body)
    if isinstance(frame, Done):
        assert set(decoded) == {"id", "done"}
    else:
        assert set(decoded) == {"id", "event"} and len(decoded["event"]) == 1
    assert decode_loop_frame(body) == (frame_id, frame)
