"""Descriptor exhaustion: with a low RLIMIT_NOFILE a flood of connections pauses
brokerd's listener; it recovers and serves when they close (05-brokerd)."""

from __future__ import annotations

import resource
import socket
import threading
import time
from typing import Any

from tests.fakes.brokerd import Home, admin, connect, echo, start

LIMIT = 48


def low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def wait_for_line(proc: Any, text: str, seconds: float = 30.0) -> None:
    """Watch the real process's log until `text` shows up (bounded)."""
    deadline = time.monotonic() + seconds
    while text not in proc.log():
        assert time.monotonic() < deadline, f"no {text!r} in the log: {proc.log()}"
        time.sleep(0.02)


def test_flood_pauses_then_recovers() -> None:
    home = Home()
    proc = start(home, preexec=low_nofile)
    flood: list[socket.socket] = []
    try:
        assert echo(home.broker)[0]["result"]["status"] == "ok"
        for _ in range(LIMIT + 20):
            flood.append(connect(home.broker))
        wait_for_line(proc, "listener paused")
        answers: list[Any] = []
        late = threading.Thread(target=lambda: answers.append(echo(home.broker, rid=2)))
        late.start()  # sits in the backlog while brokerd has no descriptor to accept it
        for sock in flood:
            sock.close()
        flood.clear()
        late.join(60)
        assert answers and answers[0][0]["result"]["status"] == "ok"
        assert admin(home.admin, "status", {})["status"]["audit"]["ok"] is True
        assert proc.proc.poll() is None  # it never stopped
        assert proc.stop() == 0
    finally:
        for sock in flood:
            sock.close()
        if proc.proc.poll() is None:
            proc.kill()
        home.cleanup()
