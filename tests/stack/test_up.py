"""`boxmaker up`'s supervisor with real child processes (small stand-in daemons).

The children here are tiny Python programs that speak the same readiness
protocol as the daemons (READY=1 on NOTIFY_SOCKET); the supervisor under test
is the real one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from boxmaker.stack._up import ChildFailed, ChildSpec, run_stack

READY_THEN_WAIT = """
import os, socket, signal, sys, time
def term(*_):
    open(sys.argv[1], "a").write("stopped cleanly\\n"); sys.exit(0)
signal.signal(signal.SIGTERM, term)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
print("ready", flush=True)
while True: time.sleep(1)
"""

DIE_EARLY = """
import sys
print("fatal: bad config \\x1b[31mred\\x1b[0m. See docs/runbook.md#x", flush=True)
sys.exit(3)
"""

IGNORE_TERM = """
import os, socket, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
while True: time.sleep(1)
"""


def spec(name: str, code: str, *args: str, ready: float = 20.0) -> ChildSpec:
    return ChildSpec(name=name, argv=[sys.executable, "-c", code, *args], ready_timeout_s=ready)


def quiet(_: str) -> None:
    pass


async def test_children_start_run_foreground_and_stop_cleanly(tmp_path: Path) -> None:
    marks = [tmp_path / "a.mark", tmp_path / "b.mark"]
    specs = [spec("a", READY_THEN_WAIT, str(marks[0])), spec("b", READY_THEN_WAIT, str(marks[1]))]
    with trio.fail_after(30):
        status = await run_stack(
            specs,
            tmp_path / "logs",
            foreground=[sys.executable, "-c", "raise SystemExit(7)"],
            say=quiet,
        )
    assert status == 7
    for mark in marks:
        assert mark.read_text() == "stopped cleanly\n"
    assert (tmp_path / "logs" / "a.log").read_text().startswith("ready")


async def test_child_dying_before_ready_is_reported_with_escaped_log_tail(tmp_path: Path) -> None:
    with trio.fail_after(30), pytest.RaisesGroup(ChildFailed, flatten_subgroups=True) as caught:
        await run_stack([spec("brokerd", DIE_EARLY)], tmp_path / "logs", foreground=None, say=quiet)
    message = str(caught.value.exceptions[0])
    assert "brokerd exited with status 3" in message
    assert "fatal: bad config" in message
    assert "\x1b" not in message and "\\u{001B}" in message


async def test_child_dying_later_stops_the_others(tmp_path: Path) -> None:
    mark = tmp_path / "a.mark"
    dies = """
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
time.sleep(0.2)
raise SystemExit(9)
"""
    specs = [spec("a", READY_THEN_WAIT, str(mark)), spec("loopd", dies)]
    foreground = [sys.executable, "-c", "import time; time.sleep(60)"]
    with trio.fail_after(30), pytest.RaisesGroup(ChildFailed, flatten_subgroups=True) as caught:
        await run_stack(specs, tmp_path / "logs", foreground=foreground, say=quiet)
    assert "loopd died (exit status 9)" in str(caught.value.exceptions[0])
    assert mark.read_text() == "stopped cleanly\n"


async def test_child_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    with trio.fail_after(30):
        status = await run_stack(
            [spec("stubborn", IGNORE_TERM)],
            tmp_path / "logs",
            foreground=[sys.executable, "-c", "pass"],
            say=quiet,
            stop_grace_s=0.5,
        )
    assert status == 0


async def test_child_never_ready_times_out(tmp_path: Path) -> None:
    silent = "import time; time.sleep(60)"
    with trio.fail_after(30), pytest.RaisesGroup(ChildFailed, flatten_subgroups=True) as caught:
        await run_stack(
            [spec("slow", silent, ready=0.5)], tmp_path / "logs", foreground=None, say=quiet
        )
    assert "did not report ready within 0.5 s" in str(caught.value.exceptions[0])


async def test_a_restartable_child_that_dies_is_started_again_and_the_others_go_on(
        tmp_path: Path) -> None:
    # Issue 22 item 1: the approval page's death stopped every daemon.
    mark, starts = tmp_path / "a.mark", tmp_path / "starts"
    dies_twice = f"""
import os, socket, sys, time
n = len(open({str(starts)!r}).read()) if os.path.exists({str(starts)!r}) else 0
open({str(starts)!r}, "a").write("x")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
if n < 2:
    raise SystemExit(1)
while True: time.sleep(1)
"""
    page = ChildSpec(name="approvals", argv=[sys.executable, "-c", dies_twice],
                     ready_timeout_s=20, restart=True, restart_delay_s=0.05)
    said: list[str] = []
    # the foreground ends once the page was started a third time, with `a` still up
    wait = (f"import os, time\nwhile not (os.path.exists({str(starts)!r}) and "
            f"len(open({str(starts)!r}).read()) >= 3): time.sleep(0.05)\n")
    with trio.fail_after(60):
        status = await run_stack([spec("a", READY_THEN_WAIT, str(mark)), page],
                                 tmp_path / "logs", foreground=[sys.executable, "-c", wait],
                                 say=said.append)
    assert status == 0
    assert mark.read_text() == "stopped cleanly\n"  # `a` ran throughout, stopped at the end
    text = "\n".join(said)
    assert "approvals died (exit status 1)" in text
    assert "approvals is started again in 0.05 s; the others go on" in text
    assert "approvals is started again in 0.1 s; the others go on" in text  # back-off
    assert "approvals is ready again" in text


async def test_a_restartable_child_that_dies_before_ready_stops_the_start(
        tmp_path: Path) -> None:
    page = ChildSpec(name="approvals", argv=[sys.executable, "-c", DIE_EARLY],
                     ready_timeout_s=20, restart=True)
    with trio.fail_after(30), pytest.RaisesGroup(ChildFailed, flatten_subgroups=True):
        await run_stack([page], tmp_path / "logs", foreground=None, say=quiet)
