"""`bxctl chat --say` (boxmaker/bxctl/_chat_say.py), a real bxctl process against loop.sock
and admin.sock served by threads of this process: the turn shown in order, a call that
waits for approval fetched whole and left pending with the command that approves it,
the exit codes (0 done, 1 failed, 3 unreachable), and the failures said on stderr."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.brokerd import BXCTL
from tests.fakes.framed_server import FramedServer as Fake
from tests.fakes.framed_server import Raw

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


def fixture(name: str, request_id: int) -> bytes:
    return json.dumps({**json.loads((FIXTURES / name).read_text()), "id": request_id}).encode()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "bxctl.toml").write_text(
        f'home = "{tmp_path}"\nloop_socket = "{tmp_path / "loop.sock"}"\n'
        f'admin_socket = "{tmp_path / "admin.sock"}"\n')
    yield tmp_path


def say(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), "--config", str(home / "bxctl.toml"), "chat",
                           "--say", "hi", *extra], capture_output=True, text=True, timeout=60,
                          check=False, env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"})


def _pending_then_refused(request: dict[str, Any]) -> list[bytes]:
    rid = request["id"]
    return [
        json.dumps({"id": rid, "event": {"text": {"delta": "let me look"}}}).encode(),
        fixture("loop-event-approval-pending.json", rid),
        fixture("loop-event-tool-denied.json", rid),
        fixture("loop-answer-done.json", rid),
    ]


def _refused_once_shown(shown: threading.Event) -> Any:
    """As loopd does: nothing more about the call until the owner has seen and refused it."""
    def answer(request: dict[str, Any]) -> Iterator[bytes]:
        first, pending, denied, done = _pending_then_refused(request)
        yield from (first, pending)
        assert shown.wait(30)
        yield from (denied, done)

    return answer


def test_a_call_waiting_for_approval_is_shown_whole_and_left_pending(home: Path) -> None:
    shown = threading.Event()

    def approval(request: dict[str, Any]) -> Iterator[bytes]:
        yield fixture("admin-answer-approval.json", request["id"])
        shown.set()

    loopd = Fake(home / "loop.sock", _refused_once_shown(shown))
    admin = Fake(home / "admin.sock", approval)
    try:
        result = say(home)
    finally:
        loopd.close()
        admin.close()
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "\u2502 let me look"
    assert lines[1] == "\u2026 read_file waits for approval 482913"
    assert lines[2].startswith("approval 482913")
    assert "  tool     http_fetch" in lines
    end = lines.index("approve it with: bxctl approve 482913")
    assert lines[end + 1:] == ["\u2717 read_file denied (refused): refused by the owner",
                               "(stop, 2 rounds, 1833+211 tokens)"]
    assert [list(r)[-1] for r in admin.requests] == ["approval"]
    assert admin.requests[0]["approval"] == {"approval_id": 482913}
    assert loopd.requests[0]["say"] == {"conversation": "default", "text": "hi"}


def test_json_prints_every_frame_and_fetches_no_approval(home: Path) -> None:
    loopd = Fake(home / "loop.sock", _pending_then_refused)
    try:
        result = say(home, "--json")
    finally:
        loopd.close()
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    assert [next(k for k in f if k != "id") for f in frames] == ["event"] * 3 + ["done"]
    assert not (home / "admin.sock").exists()  # nobody to ask, and nobody asked


def test_a_brokerd_that_does_not_answer_is_said_and_the_turn_goes_on(home: Path) -> None:
    hung_up = threading.Event()

    def no_answer(request: dict[str, Any]) -> Iterator[bytes]:
        hung_up.set()
        yield from ()

    loopd = Fake(home / "loop.sock", _refused_once_shown(hung_up))
    admin = Fake(home / "admin.sock", no_answer)
    try:
        result = say(home)
    finally:
        loopd.close()
        admin.close()
    assert result.returncode == 0
    assert result.stderr.startswith(f"bxctl: brokerd at {str(home / 'admin.sock')!r} closed "
                                    "the connection without an answer; it may or may not "
                                    "have acted")
    assert "approve it with" not in result.stdout
    assert result.stdout.splitlines()[-1] == "(stop, 2 rounds, 1833+211 tokens)"


def test_no_brokerd_is_said_and_the_turn_goes_on(home: Path) -> None:
    """(With nobody on admin.sock the fetch fails at once, before loopd's next frame.)"""
    loopd = Fake(home / "loop.sock", _pending_then_refused)
    try:
        result = say(home)
    finally:
        loopd.close()
    assert result.returncode == 0
    assert "cannot reach brokerd at" in result.stderr and "nothing was sent" in result.stderr
    assert result.stdout.splitlines()[-1] == "(stop, 2 rounds, 1833+211 tokens)"


def test_an_error_answer_fails_the_turn(home: Path) -> None:
    loopd = Fake(home / "loop.sock",
                 lambda request: [fixture("loop-answer-error-busy.json", request["id"])])
    try:
        result = say(home)
    finally:
        loopd.close()
    assert result.returncode == 1
    assert result.stdout == "error (busy): a turn is already running\n"


def test_a_loopd_that_closes_before_the_end_fails_the_turn(home: Path) -> None:
    loopd = Fake(home / "loop.sock", lambda request: [
        json.dumps({"id": request["id"], "event": {"text": {"delta": "half"}}}).encode()])
    try:
        result = say(home)
    finally:
        loopd.close()
    assert result.returncode == 1
    assert result.stdout == "\u2502 half\n"  # the open row ended before the notice
    assert result.stderr == ("bxctl: loopd closed the connection before the turn ended; "
                             "`bxctl chat` shows the conversation\n")


def test_a_bad_frame_header_is_exit_3(home: Path) -> None:
    loopd = Fake(home / "loop.sock", lambda request: [Raw(b"\x00\x00\x00\x00")])
    try:
        result = say(home)
    finally:
        loopd.close()
    assert result.returncode == 3
    assert result.stdout == ""
    assert "sent a frame that does not decode (frame length 0" in result.stderr
    assert "the turn may or may not have run" in result.stderr


def test_no_loopd_is_exit_3_and_nothing_sent(home: Path) -> None:
    result = say(home)
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr == (
        f"bxctl: cannot reach loopd at {str(home / 'loop.sock')!r} (no such socket; is "
        "loopd running?); nothing was sent. See docs/runbook.md#daemon-unreachable\n")


def test_ctrl_c_closes_the_connection_and_aborts(home: Path) -> None:
    """Closing the connection is what makes loopd cancel the turn (the trio --say
    ended here with an exception group's traceback)."""
    def open_turn(request: dict[str, Any]) -> Iterator[bytes]:
        yield json.dumps({"id": request["id"], "event": {"text": {"delta": "hello"}}}).encode()

    loopd = Fake(home / "loop.sock", open_turn, linger=True)
    chat = subprocess.Popen([str(BXCTL), "--config", str(home / "bxctl.toml"), "chat",
                             "--say", "hi"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"})
    try:
        assert chat.stdout is not None
        assert chat.stdout.read(len("\u2502 h".encode())) == "\u2502 h".encode()
        chat.send_signal(signal.SIGINT)
        _, err = chat.communicate(timeout=30)
    finally:
        chat.kill()
        chat.wait()
        loopd.close()
    assert chat.returncode == 1
    assert err.decode() == "\nAborted!\n"
    assert loopd.hung_up.wait(10)
