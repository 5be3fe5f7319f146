"""The interactive chat's trio session (boxmaker/bxctl/_chat_session.py), in process: the one
stdin reader over a real pipe, and a turn over a real loop.sock served by a thread, shown
by the shared view; a cancelled turn says so, a failed one is a notice and the chat goes
on.  (The whole chat on a pseudo-terminal is tests/bxctl/test_chat_frames.py's.)"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.bxctl._chat_session import ChatSession, LineReader
from boxmaker.bxctl._chat_view import ChatView
from boxmaker.bxctl._config import load_config
from tests.fakes.framed_server import Answer, Body, FramedServer


def one_text_then_done(go: threading.Event) -> Answer:
    """loop.sock's answer to a `say`: one text event, then `done` once `go` is set."""
    def answer(request: dict[str, Any]) -> Iterator[Body]:
        yield {"id": request["id"], "event": {"text": {"delta": "thinking"}}}
        if go.wait(30):
            yield {"id": request["id"], "done": {
                "finish": "stop", "rounds": 1,
                "usage": {"prompt_tokens": 1, "completion_tokens": 2}}}

    return answer


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[ChatSession, io.StringIO, threading.Event]]:
    monkeypatch.setenv("COLUMNS", "80")
    go = threading.Event()
    loopd = FramedServer(tmp_path / "loop.sock", one_text_then_done(go))
    (tmp_path / "bxctl.toml").write_text(f'home = "{tmp_path}"\n'
                                         f'loop_socket = "{tmp_path / "loop.sock"}"\n')
    out = io.StringIO()
    read_end, write_end = os.pipe()
    os.close(write_end)
    reader = LineReader(trio.lowlevel.FdStream(read_end), io.StringIO())
    yield (ChatSession(config=load_config(tmp_path / "bxctl.toml"), conversation="c",
                       view=ChatView(out=out), reader=reader), out, go)
    go.set()
    loopd.close()


async def test_lines_from_a_pipe_then_the_end() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, "first\nsecond \u00e9\nno newline".encode())
    os.close(write_end)
    reader = LineReader(trio.lowlevel.FdStream(read_end), io.StringIO())
    assert [await reader.readline() for _ in range(4)] == [
        "first\n", "second \u00e9\n", "no newline", None]
    await reader.aclose()


async def test_a_turn_is_shown_by_the_view(
        session: tuple[ChatSession, io.StringIO, threading.Event]) -> None:
    chat, out, go = session
    go.set()
    assert await chat.run_turn("hi") is True
    assert out.getvalue() == "\u2502 thinking\n(stop, 1 round, 1+2 tokens)\n"


async def test_a_cancelled_turn_says_so(
        session: tuple[ChatSession, io.StringIO, threading.Event]) -> None:
    chat, out, _ = session

    async def cancel_when_shown() -> None:
        while "thinking" not in out.getvalue():
            await trio.sleep(0)  # a checkpoint, not a wait for time
        assert chat.turn_scope is not None
        chat.turn_scope.cancel()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_shown)
            assert await chat.run_turn("hi") is False
    assert out.getvalue() == "\u2502 thinking\n(turn cancelled)\n"
    assert chat.turn_scope is None


async def test_an_unreachable_loopd_is_a_notice_and_not_raised(tmp_path: Path) -> None:
    (tmp_path / "bxctl.toml").write_text(f'home = "{tmp_path}"\n')
    out = io.StringIO()
    chat = ChatSession(config=load_config(tmp_path / "bxctl.toml"), conversation="c",
                       view=ChatView(out=out), reader=LineReader(None, io.StringIO()))
    assert await chat.run_turn("hi") is False
    assert "cannot reach loopd at" in out.getvalue()
