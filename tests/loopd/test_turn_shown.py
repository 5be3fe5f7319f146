"""A turn whose answer leaves out the result (issue 27): loopd shows it to the owner.

The fake llama-server scripts the model's answer; broker.sock is a real socket
that answers each call with a file's content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from boxmaker._sockets._streams import send_frame
from boxmaker.bxctl import _chat_render as render
from boxmaker.loopd._shown import RESULT_SHOWN_TEXT_FOR_MODEL, shown_text
from boxmaker.proto.wire._wire_broker import Denied, Result, encode_broker_answer
from boxmaker.proto.wire._wire_loop import MAX_NOTICE_CHARS, NoticeEvent
from tests.loopd.test_turn import Harness, echo_call, text

NOTE = "# Demo notes\nboxmaker up made this directory.\n"


def answering(output: dict[str, Any]) -> Any:
    async def answer(stream: trio.SocketStream, request_id: int) -> None:
        result = Result(status="ok", output=output, label="private",  # type: ignore[arg-type]
                        untrusted=False)
        await send_frame(stream, encode_broker_answer(request_id, result))
    return answer


async def refusing(stream: trio.SocketStream, request_id: int) -> None:
    denied = Denied(code="no_grant", reason="no grant covers it", grant=None, runbook=None)
    await send_frame(stream, encode_broker_answer(request_id, denied))


def notices(harness: Harness) -> list[NoticeEvent]:
    return [e for e in harness.events if isinstance(e, NoticeEvent)]


async def test_an_answer_that_ignores_the_result_ends_with_the_result_shown(
    tmp_path: Path,
) -> None:
    harness = Harness(tmp_path, [echo_call("a"), text("I have read your note."),
                                 text("It was shown to you.")], answering({"text": NOTE}))
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "stop"
    [shown] = notices(harness)
    assert (shown.kind, shown.call_id, shown.tool) == ("result", "a", "echo")
    assert shown.text == shown_text("echo", "ok", {"text": NOTE})
    assert isinstance(harness.events[-1], NoticeEvent)  # after the model's words
    note = RESULT_SHOWN_TEXT_FOR_MODEL.format(tool="echo")
    assert harness.store.load("c1")[-1].content == note
    with trio.fail_after(30):  # the model's next turn sees that it was shown
        await harness.run("what did you show me?")
    assert {"role": "assistant", "content": note} in harness.fake.chat_bodies[-1]["messages"]


async def test_an_answer_that_quotes_the_result_shows_nothing_more(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a"), text("The note says: Demo notes.")],
                      answering({"text": NOTE}))
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "stop"
    assert notices(harness) == []
    assert [m.role for m in harness.store.load("c1")] == ["user", "assistant", "tool",
                                                           "assistant"]


async def test_a_refused_call_or_no_call_shows_no_result(tmp_path: Path) -> None:
    refused = Harness(tmp_path / "r", [echo_call("a"), text("It was refused.")], refusing)
    (tmp_path / "r").mkdir()
    plain = Harness(tmp_path, [text("Hello there.")], refusing)
    with trio.fail_after(30):
        await refused.run()
        await plain.run()
    assert notices(refused) == [] and notices(plain) == []


async def test_a_turn_cut_at_max_rounds_shows_the_last_result(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a", '{"text": "one"}'),
                                 echo_call("b", '{"text": "two"}')],
                      answering({"text": NOTE}), max_rounds=2)
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "max_rounds"
    [shown] = notices(harness)
    assert (shown.kind, shown.call_id) == ("result", "b")


async def test_hostile_result_bytes_are_escaped_on_screen_and_bounded(tmp_path: Path) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07 evil line\n" + "\u202e" + "x" * 100_000
    harness = Harness(tmp_path, [echo_call("a"), text("Done.")], answering({"content": hostile}))
    with trio.fail_after(30):
        await harness.run()
    [shown] = notices(harness)
    assert len(shown.text) <= MAX_NOTICE_CHARS and shown.text.endswith("\u2026 (cut)")
    screen = render.notice(shown, 60)
    assert not any(c in screen for c in "\x1b\x07\u202e")
    rows = screen.splitlines()
    assert rows[0].startswith("\u25b8 the answer left out the result of echo")
    assert all(len(row) <= 60 for row in rows)
    assert "\\u{001B}[2J" in screen
