"""Disk failure: an injected write or fsync error makes the audit log unavailable
(sticky); every later call is refused and nothing is answered as if recorded."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio

from boxmaker._brokerd_config import load_config
from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.brokerd._serve import ServeHandle, serve
from boxmaker.proto._framing import FrameDecoder
from tests.fakes.brokerd import ECHO_GRANT, Home

ECHO_ASK = ECHO_GRANT.replace('mode = "allow"', 'mode = "ask"')


async def exchange(path: Any, obj: dict[str, Any],
                   after_first: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
                   ) -> list[dict[str, Any]]:
    stream = await trio.open_unix_socket(os.fspath(path))
    decoder = FrameDecoder()
    await send_frame(stream, json.dumps(obj).encode())
    out: list[dict[str, Any]] = []
    async with stream:
        while (body := await receive_frame(stream, decoder)) is not None:
            out.append(json.loads(body))
            if len(out) == 1 and after_first is not None:
                await after_first(out[0])
    return out


def echo(rid: int, session: str = "s1") -> dict[str, Any]:
    return {"v": 1, "id": rid, "call": {"session": session, "tool": "echo",
                                        "args": {"text": "x"}}}


class Failing:
    """A write or fsync that starts failing once `armed` is set."""

    def __init__(self) -> None:
        self.armed = False

    def write(self, fd: int, data: bytes) -> int:
        if self.armed:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)

    async def fsync(self, fd: int) -> None:
        if self.armed:
            raise OSError(errno.EIO, "Input/output error")
        os.fsync(fd)


@pytest.fixture
async def home() -> AsyncIterator[Home]:
    made = Home(grants={"echo.toml": ECHO_GRANT, "ask.toml": """
[[grant]]
id = "notes-ask"
tool = "read_file"
mode = "ask"
paths = ["/srv/notes"]
"""})
    yield made
    made.cleanup()


@pytest.mark.parametrize("what", ["write", "fsync"])
async def test_unavailable_is_sticky(home: Home, what: str) -> None:
    failing = Failing()
    config = load_config(home.config)
    kwargs: dict[str, Any] = {"state_in_thread": False}
    if what == "write":
        kwargs["write"] = failing.write
        kwargs["fsync"] = None
    else:
        kwargs["fsync"] = failing.fsync
    async with trio.open_nursery() as nursery:
        handle: ServeHandle = await nursery.start(
            lambda task_status: serve(config, task_status=task_status, **kwargs))
        assert (await exchange(home.broker, echo(1)))[0]["result"]["status"] == "ok"
        waiting: list[dict[str, Any]] = []

        async def arm(first: dict[str, Any]) -> None:
            waiting.append(first)
            failing.armed = True
            answer = await exchange(home.admin, {"v": 1, "id": 2, "approve": {
                "approval_id": first["pending"]["approval_id"]}})
            assert answer[0]["error"]["code"] == "audit_unavailable"

        pending = await exchange(home.broker, {"v": 1, "id": 3, "call": {
            "session": "s2", "tool": "read_file", "args": {"path": "/srv/notes/a"}}}, arm)
        assert "pending" in pending[0]
        assert pending[1]["error"]["code"] == "audit_unavailable"  # never ran, never result
        failing.armed = False  # the disk is fine again: still unavailable until restart
        for rid in range(4, 8):
            answer = await exchange(home.broker, echo(rid))
            assert answer == [{"id": rid, "error": {
                "code": "audit_unavailable", "message": answer[0]["error"]["message"],
                "runbook": "docs/runbook.md#audit-unavailable"}}]
            assert answer[0]["error"]["message"].endswith("docs/runbook.md#audit-unavailable")
        status = (await exchange(home.admin, {"v": 1, "id": 9, "status": {}}))[0]["status"]
        assert status["audit"]["ok"] is False
        assert any("unavailable" in w for w in status["warnings"])
        declassify = await exchange(home.admin, {"v": 1, "id": 10, "declassify": {
            "session": "s1", "label": "public", "untrusted": False, "reason": "x"}})
        assert declassify[0]["error"]["code"] == "audit_unavailable"
        handle.stop()
    lines = [json.loads(line) for name in sorted(os.listdir(home.audit))
             if name.endswith(".jsonl")
             for line in (home.audit / name).read_bytes().splitlines()]
    keys = [next(k for k in line if k not in ("seq", "ts", "prev")) for line in lines]
    # Only what was durable before the failure is there: nothing claims more.
    assert keys[:4] == ["start", "call", "decision", "result"]
    assert "stop" not in keys
