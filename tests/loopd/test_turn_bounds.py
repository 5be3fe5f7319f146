"""What loopd forwards stays inside 02-wire's bounds (issue 11): the turn in process.

The fake llama-server and a scripted broker.sock (tests/loopd/test_turn.py's
harness); every event the turn emits is encoded as the real frame would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from boxmaker.proto._framing import MAX_FRAME
from boxmaker.proto._json import MAX_DEPTH, nesting_depth
from boxmaker.proto.wire._wire_loop import (
    MAX_ARGS_BYTES,
    MAX_ARGS_DEPTH,
    MAX_CALL_ID_CHARS,
    MAX_RAW_ARGS_CHARS,
    MAX_TEXT_DELTA_BYTES,
    TextEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    decode_loop_frame,
    encode_loop_frame,
)
from tests.loopd.test_turn import Harness, echo_call, ok_answer, text


def deep(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def frames_decode(harness: Harness) -> None:
    for event in harness.events:
        body = encode_loop_frame(7, event)
        assert len(body) <= MAX_FRAME
        assert decode_loop_frame(body) == (7, event)


async def test_arguments_too_deep_or_too_large_are_raw_args_and_bad_args(
        tmp_path: Path) -> None:
    large = json.dumps({"text": "\x01" * (MAX_ARGS_BYTES // 6 + 1)})  # 6 bytes each as JSON
    harness = Harness(tmp_path, [echo_call("a", deep(MAX_ARGS_DEPTH + 1)),
                                 echo_call("b", deep(MAX_ARGS_DEPTH)),
                                 echo_call("c", large), text("ok")], ok_answer)
    with trio.fail_after(60):
        done = await harness.run()
    assert done.finish == "stop"
    calls = [e for e in harness.events if isinstance(e, ToolCallEvent)]
    assert calls[0].args is None and calls[0].raw_args == deep(MAX_ARGS_DEPTH + 1)
    assert calls[1].args is not None and nesting_depth(calls[1].args) == MAX_ARGS_DEPTH
    assert calls[2].args is None and calls[2].raw_args is not None
    assert len(calls[2].raw_args) < MAX_RAW_ARGS_CHARS + 100
    assert calls[2].raw_args.endswith(f"(cut: {len(large)} characters)")
    denials = [e for e in harness.events if isinstance(e, ToolDeniedEvent)]
    assert [d.call_id for d in denials if d.code == "bad_args"] == ["a", "c"]
    assert "nest 33 deep" in denials[0].reason
    assert harness.broker_calls == ["echo"]  # only the call inside the bounds
    frames_decode(harness)
    # the history keeps the model's call as it sent it
    assistant = harness.store.load("c1")[5]
    assert assistant.tool_calls is not None and assistant.tool_calls[0].arguments == large


async def test_a_long_delta_and_a_long_call_id_fit_their_frames(tmp_path: Path) -> None:
    long_text = ("\u00e9\U0001F600\x02" * 200_000) + "end"
    long_id = "i" * 100_000
    harness = Harness(tmp_path, [
        {"steps": [{"role": "assistant"}, {"text": long_text},
                   {"tool_call": {"index": 0, "id": long_id, "name": "echo",
                                  "arguments": ['{"text": "x"}']}},
                   {"finish": "tool_calls"}, {"usage": True}]},
        text("ok")], ok_answer)
    with trio.fail_after(60):
        await harness.run()
    deltas = [e.delta for e in harness.events if isinstance(e, TextEvent)]
    assert "".join(deltas[:-1]) == long_text and len(deltas) > 2
    assert all(len(d.encode()) <= MAX_TEXT_DELTA_BYTES for d in deltas)
    call_ids = {e.call_id for e in harness.events if hasattr(e, "call_id")}
    assert call_ids == {long_id[:MAX_CALL_ID_CHARS]}
    messages = harness.store.load("c1")
    assert messages[1].tool_calls is not None
    assert messages[1].tool_calls[0].id == messages[2].tool_call_id == long_id[:MAX_CALL_ID_CHARS]
    frames_decode(harness)
    assert MAX_ARGS_DEPTH + 4 < MAX_DEPTH
