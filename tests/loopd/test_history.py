"""Conversation store records as loop.sock answers (boxmaker/loopd/_history.py),
also from a real conversation store; every answer encodes as a valid frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.loopd._conversations import (
    ConversationInfo,
    ConversationStore,
    Message,
    ToolCallRef,
)
from boxmaker.loopd._history import conversation_summaries, history_messages
from boxmaker.proto._convert import InvalidValue
from boxmaker.proto.wire._wire_loop import History, decode_loop_frame, encode_loop_frame

TS = "2026-12-01T10:00:00.000000Z"


def messages() -> list[Message]:
    return [
        Message(role="user", content="read it", tool_calls=None, tool_call_id=None,
                interrupted=False, ts=TS),
        Message(role="assistant", content=None,
                tool_calls=[ToolCallRef(id="c1", name="read_file", arguments='{"path":"/a"}'),
                            ToolCallRef(id="c2", name="echo", arguments="not json")],
                tool_call_id=None, interrupted=False, ts=TS),
        Message(role="tool", content='{"ok":1}', tool_calls=None, tool_call_id="c1",
                interrupted=False, ts=TS),
        Message(role="assistant", content="half a sen", tool_calls=[], tool_call_id=None,
                interrupted=True, ts=TS),
    ]


def test_history_keeps_every_field_in_the_openai_shape() -> None:
    out = history_messages(messages())
    assert [m.role for m in out] == ["user", "assistant", "tool", "assistant"]
    calls = out[1].tool_calls
    assert calls is not None
    assert [(c.id, c.type, c.function.name, c.function.arguments) for c in calls] == [
        ("c1", "function", "read_file", '{"path":"/a"}'), ("c2", "function", "echo", "not json")]
    assert out[2].tool_call_id == "c1" and out[2].content == '{"ok":1}'
    # An empty list of calls is shown as null (the wire allows no empty list).
    assert out[3].tool_calls is None and out[3].interrupted and out[3].content == "half a sen"
    frame = encode_loop_frame(3, History(messages=out))
    assert decode_loop_frame(frame) == (3, History(messages=out))


def test_a_stored_record_the_wire_cannot_carry_is_refused_not_fixed() -> None:
    bad = Message(role="user", content=None, tool_calls=None, tool_call_id=None,
                  interrupted=False, ts=TS)
    with pytest.raises(InvalidValue):
        history_messages([bad])


async def test_history_and_summaries_of_a_real_store(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "conversations", fsync=False)
    for message in messages():
        await store.append("c-1", message)
    await store.append("c-2", messages()[0])
    assert history_messages(store.load("c-1")) == history_messages(messages())
    summaries = conversation_summaries(store.list())
    assert [(s.name, s.messages) for s in summaries.items] == [("c-1", 4), ("c-2", 1)]


def test_summaries() -> None:
    items = [ConversationInfo(name="c-1", messages=4, updated_at=TS),
             ConversationInfo(name="c-2", messages=0, updated_at=TS)]
    summaries = conversation_summaries(items)
    assert [(s.name, s.messages, s.updated_at) for s in summaries.items] == [
        ("c-1", 4, TS), ("c-2", 0, TS)]
    assert decode_loop_frame(encode_loop_frame(1, summaries)) == (1, summaries)
    assert conversation_summaries([]).items == []
