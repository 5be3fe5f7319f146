"""Conversation files: fsynced JSONL, torn tails cut, damage refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.loopd._conversations import (
    ConversationDamaged,
    ConversationStore,
    Message,
    ToolCallRef,
    to_chat,
    user_message,
)

TS = "2026-11-29T07:00:00.000000Z"


def assistant(text: str, calls: list[ToolCallRef] | None = None) -> Message:
    return Message(
        role="assistant",
        content=text,
        tool_calls=calls,
        tool_call_id=None,
        interrupted=False,
        ts=TS,
    )


async def test_append_and_load_round_trip(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "conversations")
    call = ToolCallRef(id="t1", name="read_file", arguments='{"path": "/x/y"}')
    messages = [
        user_message("hello \u202e world", TS),
        assistant("let me look", [call]),
        Message(
            role="tool",
            content='{"ok": 1}',
            tool_calls=None,
            tool_call_id="t1",
            interrupted=False,
            ts=TS,
        ),
    ]
    for message in messages:
        await store.append("default", message)
    assert store.load("default") == messages
    # a new store over the same directory (a restart) sees the same
    assert ConversationStore(tmp_path / "conversations").load("default") == messages
    [info] = store.list()
    assert (info.name, info.messages) == ("default", 3)


async def test_torn_tail_is_cut_and_appending_continues(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    await store.append("c1", user_message("one", TS))
    with (tmp_path / "c1.jsonl").open("ab") as handle:
        handle.write(b'{"role":"assistant","content":"half')
    assert [m.content for m in store.load("c1")] == ["one"]
    await store.append("c1", user_message("two", TS))
    assert [m.content for m in store.load("c1")] == ["one", "two"]


async def test_damaged_line_is_refused(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    await store.append("c1", user_message("one", TS))
    with (tmp_path / "c1.jsonl").open("ab") as handle:
        handle.write(b'{"role":"user","content":"x","extra":1}\n')
    with pytest.raises(ConversationDamaged, match="line 2"):
        store.load("c1")


def test_missing_conversation_is_empty(tmp_path: Path) -> None:
    assert ConversationStore(tmp_path).load("nothing-yet") == []


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "a/b", "x" * 65, "../etc"])
def test_bad_names_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        ConversationStore(tmp_path).path_of(name)


def test_to_chat_shapes_tool_calls() -> None:
    call = ToolCallRef(id="t1", name="echo", arguments='{"text":"hi"}')
    chat = to_chat([user_message("hi", TS), assistant("", [call])])
    assert chat[0] == {"role": "user", "content": "hi"}
    assert chat[1]["tool_calls"] == [
        {"id": "t1", "type": "function", "function": {"name": "echo", "arguments": '{"text":"hi"}'}}
    ]
