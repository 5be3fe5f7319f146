"""`bxctl chat` against a loop.sock server that sends frames bxctl cannot decode.

A compromised or buggy loopd (a real Unix socket served from this process,
by our own uid, so bxctl's uid check passes) sends a frame nested deeper than
02-wire's 64 levels, a frame with an unknown field, one that is not JSON, and
a frame with a hostile message; bxctl, interactive on a pseudo-terminal and
with --say, says what happened (escaped), skips it, and keeps going.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.brokerd import BXCTL
from tests.fakes.framed_server import FramedServer, Raw
from tests.fakes.pty import Pty


def deep(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def hostile_frames(request_id: int, turn: int) -> list[bytes]:
    def event(kind: str, body: dict[str, Any]) -> bytes:
        return json.dumps({"id": request_id, "event": {kind: body}}).encode()

    return [
        event("text", {"delta": f"turn {turn} starts"}),
        event("tool_call", {"call_id": "t1", "tool": "echo", "args": deep(62),
                            "raw_args": None}),
        event("text", {"delta": " -- unknown field next", "extra": 1}),
        b"this is not json \x1b[2J",
        json.dumps({"id": request_id, "error": {
            "code": "turn_failed", "message": "boom \x1b]0;pwned\x07", "runbook": None,
            "extra": True}}).encode(),
        event("text", {"delta": " -- and still reading"}),
        json.dumps({"id": request_id, "done": {
            "finish": "stop", "rounds": 1,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}}).encode(),
    ]


Script = Callable[[int, int], list["bytes | threading.Event"]]


class FakeLoopd(FramedServer):
    """loop.sock served by a thread: every `say` gets the script's frames (an Event
    in the script is waited for before the frames after it are sent); any other
    request (the chat banner's `status`) is closed unanswered."""

    def __init__(self, path: Path, script: Script = hostile_frames) -> None:
        self.script = script
        self.turns = 0
        super().__init__(path, self.say)

    def say(self, request: dict[str, Any]) -> Iterator[bytes]:
        if "say" not in request:  # the banner's status request: no answer
            return
        self.turns += 1
        for body in self.script(request["id"], self.turns):
            if isinstance(body, threading.Event):
                assert body.wait(timeout=60)
            else:
                yield body


def write_config(home: Path) -> Path:
    """bxctl.toml for sockets in `home`: loop.sock and admin.sock."""
    config = home / "bxctl.toml"
    config.write_text(f'home = "{home}"\nloop_socket = "{home / "loop.sock"}"\n'
                      f'admin_socket = "{home / "admin.sock"}"\n')
    return config


def open_chat(config: Path, *, columns: int) -> Pty:
    return Pty([str(BXCTL), "--config", str(config), "chat"],
               env=dict(os.environ, COLUMNS=str(columns)))


@pytest.fixture
def fake_loopd(tmp_path: Path) -> Iterator[tuple[FakeLoopd, Path]]:
    fake = FakeLoopd(tmp_path / "loop.sock")
    config = write_config(tmp_path)
    yield fake, config
    fake.close()


def test_say_survives_frames_it_cannot_decode(fake_loopd: tuple[FakeLoopd, Path]) -> None:
    _, config = fake_loopd
    result = subprocess.run([str(BXCTL), "--config", str(config), "chat", "--say", "hi"],
                            capture_output=True, text=True, timeout=60, check=False)
    everything = result.stdout + result.stderr
    assert "Traceback" not in everything and "ExceptionGroup" not in everything
    assert "\x1b" not in everything and "\x07" not in everything
    assert "turn 1 starts" in result.stdout and "and still reading" in result.stdout
    assert everything.count("could not decode") == 4, everything
    assert result.returncode == 0, everything


def test_say_json_skips_them_on_stdout_and_says_so_on_stderr(
        fake_loopd: tuple[FakeLoopd, Path]) -> None:
    _, config = fake_loopd
    result = subprocess.run([str(BXCTL), "--config", str(config), "chat", "--say", "hi",
                             "--json"], capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    assert [next(iter(f.get("event", {"done": 0}))) for f in frames] == ["text", "text", "done"]
    assert result.stdout.isascii()
    assert result.stderr.count("could not decode") == 4
    assert result.returncode == 0


def test_interactive_chat_keeps_going(fake_loopd: tuple[FakeLoopd, Path]) -> None:
    fake, config = fake_loopd
    chat = open_chat(config, columns=80)
    try:
        chat.expect(b"you> ")
        chat.type("first\n")
        chat.expect(b"and still reading")
        chat.expect(b"you> ")
        chat.type("second\n")
        chat.expect(b"turn 2 starts")
        chat.expect(b"and still reading")
        chat.expect(b"you> ")
    finally:
        code = chat.close()
    screen = chat.seen.decode(errors="replace")
    assert code == 0, screen
    assert "Traceback" not in screen and "\x1b[2J" not in screen and "\x07" not in screen
    assert fake.turns == 2


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


def approval_482913(request: dict[str, Any]) -> list[dict[str, Any]]:
    """admin.sock's answer to every request: the fixture approval 482913."""
    answer = json.loads((FIXTURES / "admin-answer-approval.json").read_text())
    return [{**answer, "id": request["id"]}]


def test_text_sent_while_the_question_is_on_screen_gets_a_row_of_its_own(
        tmp_path: Path) -> None:
    """A compromised loopd sends model text right behind the approval question, so
    that the terminal would wrap it to column 0: it starts a gutter row instead."""
    question_seen = threading.Event()
    forged = ("x" * 20 + "approval 999 \u00b7 expires 07:10:00 (in 9m58s)")

    def script(request_id: int, turn: int) -> list[bytes | threading.Event]:
        def event(kind: str, body: dict[str, Any]) -> bytes:
            return json.dumps({"id": request_id, "event": {kind: body}}).encode()

        return [
            event("approval_pending", {"call_id": "t1", "approval_id": 482913,
                                       "tool": "http_fetch",
                                       "expires_at": "2026-11-29T07:10:00.000000Z"}),
            question_seen,
            event("text", {"delta": forged}),
            json.dumps({"id": request_id, "done": {
                "finish": "stop", "rounds": 1,
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}}).encode(),
        ]

    loopd = FakeLoopd(tmp_path / "loop.sock", script)
    admin = FramedServer(tmp_path / "admin.sock", approval_482913)
    config = write_config(tmp_path)
    chat = open_chat(config, columns=80)
    try:
        chat.expect(b"you> ")
        chat.type("go\n")
        chat.expect(b"or Enter to leave it pending: ")
        question_seen.set()
        chat.expect(b"(stop, 1 round")
        chat.expect(b"you> ")
    finally:
        code = chat.close()
        loopd.close()
        admin.close()
    assert code == 0
    rows = chat.seen.decode().replace("\r\n", "\n").split("\n")
    [question] = [r for r in rows if r.startswith("type 482913 to approve")]
    assert question.endswith("pending: ")  # nothing of the model's behind it
    assert not any(r.startswith("approval 999") for r in rows)
    assert any(r.startswith("\u2502 " + "x" * 20 + "approval 999") for r in rows)


def test_a_frame_header_out_of_range_ends_only_that_turn(tmp_path: Path) -> None:
    """A length past 8 MiB cannot be skipped (the stream is out of step): the turn
    ends with the daemon-unreachable message, and the next turn runs."""

    def bad_header_first(request_id: int, turn: int) -> list[bytes | threading.Event]:
        if turn > 1:
            return hostile_frames(request_id, turn)
        return [json.dumps({"id": request_id, "event": {"text": {"delta": "turn one"}}}
                           ).encode(),
                Raw(struct.pack(">I", 0xFFFFFFFF) + b"x" * 64)]

    loopd = FakeLoopd(tmp_path / "loop.sock", bad_header_first)
    config = write_config(tmp_path)
    chat = open_chat(config, columns=200)
    try:
        chat.expect(b"you> ")
        chat.type("first\n")
        chat.expect(b"sent a frame that does not decode")
        chat.expect(b"you> ")
        chat.type("second\n")
        chat.expect(b"and still reading")
        chat.expect(b"you> ")
    finally:
        code = chat.close()
        loopd.close()
    screen = chat.seen.decode(errors="replace")
    assert code == 0, screen
    assert "exceeds the limit" in screen and "Traceback" not in screen
