"""Descriptor exhaustion: with a low RLIMIT_NOFILE a flood of connections pauses
brokerd's listener; it recovers and serves when they close (05-brokerd)."""

from __future__ import annotations

import resource
import socket
import threading
from typing import Any

from tests.fakes.brokerd import Home, admin, connect, echo, start

LIMIT = 48


def low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def test_flood_pauses_then_recovers() -> None:
    home = Home()
    proc = start(home, preexec=low_nofile, pipe_stderr=True)
    flood: list[socket.socket] = []
    try:
        assert echo(home.broker)[0]["result"]["status"] == "ok"
        for _ in range(LIMIT + 20):
            flood.append(connect(home.broker))
        proc.read_until("listener paused")  # brokerd's own word that it ran out
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
