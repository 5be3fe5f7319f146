"""loop.sock events are bounded by construction (issue 11): what loopd may send,
bxctl also refuses to take."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._errors import DecodeError
from boxmaker.proto._json import nesting_depth
from boxmaker.proto.wire._wire_loop import (
    MAX_ARGS_BYTES,
    MAX_ARGS_DEPTH,
    MAX_CALL_ID_CHARS,
    MAX_TEXT_DELTA_BYTES,
    args_problem,
    decode_loop_frame,
    split_text,
)


def nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def tool_call(args: object, call_id: str = "t1") -> bytes:
    return json.dumps({"id": 1, "event": {"tool_call": {
        "call_id": call_id, "tool": "echo", "args": args, "raw_args": None}}}).encode()


def test_nesting_depth() -> None:
    assert [nesting_depth(v) for v in (1, {}, [], {"a": [1]}, [[], [[{}]]])] == [0, 1, 1, 2, 4]
    assert nesting_depth(nested(62)) == 62


def test_args_deeper_than_the_bound_do_not_decode() -> None:
    assert decode_loop_frame(tool_call(nested(MAX_ARGS_DEPTH)))[1]
    with pytest.raises(DecodeError, match="nest 33 deep"):
        decode_loop_frame(tool_call(nested(MAX_ARGS_DEPTH + 1)))
    assert args_problem(nested(62)) == "the arguments nest 62 deep, more than 32"


def test_args_larger_than_the_bound_do_not_decode() -> None:
    big = {"text": "x" * MAX_ARGS_BYTES}
    assert args_problem(big) is not None
    with pytest.raises(DecodeError, match="bytes as JSON"):
        decode_loop_frame(tool_call(big))


def test_long_deltas_and_call_ids_do_not_decode() -> None:
    body = json.dumps({"id": 1, "event": {"text": {"delta": "y" * (MAX_TEXT_DELTA_BYTES + 1)}}})
    with pytest.raises(DecodeError, match="delta is longer"):
        decode_loop_frame(body)
    with pytest.raises(DecodeError, match="call_id is longer"):
        decode_loop_frame(tool_call({}, "c" * (MAX_CALL_ID_CHARS + 1)))


@settings(max_examples=200)
@given(st.text(st.characters(codec=None, exclude_categories=("Cs",)), max_size=3000),
       st.integers(min_value=4, max_value=64))
def test_split_text_cuts_between_code_points_within_the_limit(text: str, limit: int) -> None:
    pieces = split_text(text, limit)
    assert "".join(pieces) == text
    assert all(len(p.encode()) <= limit for p in pieces)
    assert all(pieces) or pieces == [""]
