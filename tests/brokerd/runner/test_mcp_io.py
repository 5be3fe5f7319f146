"""The trio adapter of the MCP client against real server processes (12 "Tests").

Two peers, both plain subprocesses: the real `mcp-server-time` 2026.10.19 (both
eras; skipped without scripts/get-mcp-servers) and the hand-written
misbehaving server of tests/fakes/mcp_stdio_server.py, driven by a script of
behaviours.  The test wraps the server's pipes to keep every byte written and
read, and recomputes `request_sha256` and `response_sha256` from them.  Where
a timer must fire the test runs on `autojump_clock`: the clock runs at real
speed while the server is expected to answer, and jumps once the server is
expected to be silent, so no test waits for a timeout in wall-clock time.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from boxmaker.brokerd.runner._mcp_io import McpConnection, StderrTail
from boxmaker.proto.mcp import (
    CallAnswered,
    CallFailed,
    CallTimedOut,
    ClientProtocol,
    EraDecided,
    Listed,
    McpClient,
    Unavailable,
    compare_tools,
    pin_tools,
)
from tests.brokerd.runner._mcp_fixtures import FAKE

TIME_VERSION = "2026.10.19"
SERVERS = Path(os.environ.get("BOXMAKER_MCP_SERVERS",
                              Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                              / "boxmaker" / "mcp-servers"))
TIME = SERVERS / f"time-{TIME_VERSION}"
needs_time = pytest.mark.skipif(
    not (TIME / "mcp_server_time" / "__init__.py").is_file(),
    reason="the MCP reference server is not installed: run scripts/get-mcp-servers")
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1"}
ROOMY = 60.0
"""A start or call timeout the peer always meets (the real clock runs)."""


class RecordingSend(trio.abc.SendStream):
    def __init__(self, inner: trio.abc.SendStream) -> None:
        self.inner = inner
        self.data = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)
        self.data += data

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def lines(self) -> list[bytes]:
        return bytes(self.data).split(b"\n")[:-1]


class RecordingReceive(trio.abc.ReceiveStream):
    def __init__(self, inner: trio.abc.ReceiveStream) -> None:
        self.inner = inner
        self.data = bytearray()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        chunk = await self.inner.receive_some(max_bytes)
        self.data += chunk
        return bytes(chunk)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def lines(self) -> list[bytes]:
        return bytes(self.data).split(b"\n")


@attrs.define
class Peer:
    connection: McpConnection
    process: trio.Process
    sent: RecordingSend
    read: RecordingReceive
    stderr: StderrTail


@asynccontextmanager
async def peer(argv: list[str], protocol: ClientProtocol, *, env: dict[str, str] | None = None,
               output_max_bytes: int = 65536) -> AsyncIterator[Peer]:
    process = await trio.lowlevel.open_process(
        argv, env=env or ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    assert process.stdin and process.stdout and process.stderr
    sent, read = RecordingSend(process.stdin), RecordingReceive(process.stdout)
    client = McpClient(protocol=protocol, version="0.test", output_max_bytes=output_max_bytes)
    tail = StderrTail()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tail.read_all, process.stderr)
            yield Peer(McpConnection(client, sent, read, name="test"), process, sent, read,
                       tail)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


def fake(*behaviours: str, **more: Any) -> list[str]:
    import json
    return [sys.executable, "-I", str(FAKE),
            json.dumps({"behaviours": list(behaviours), **more})]


def time_server() -> list[str]:
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


async def listed(p: Peer, **timeouts: float) -> Listed:
    with trio.fail_after(ROOMY * 2):
        got = await p.connection.negotiate(start_timeout_s=timeouts.get("start", ROOMY),
                                           discover_timeout_s=timeouts.get("discover", ROOMY))
    assert isinstance(got, Listed), got
    return got


async def call(p: Peer, name: str = "echo", args: dict[str, Any] | None = None,
               timeout: float = ROOMY) -> Any:
    with trio.fail_after(timeout * 2):
        return await p.connection.call(7, name, args if args is not None else {"text": "hi"},
                                       call_timeout_s=timeout)


def answer_line(p: Peer) -> bytes:
    return next(line for line in p.read.lines() if b'"bx-call-7"' in line)


# -- the real server ------------------------------------------------------------------------


@needs_time
@pytest.mark.parametrize("protocol", ["auto", "2026-07-28", "2025-11-25", "auto-legacy"])
async def test_the_reference_server_answers_a_call_in_each_era(protocol: ClientProtocol) -> None:
    env = {**ENV, "PYTHONPATH": str(TIME)}
    async with peer(time_server(), protocol, env=env) as p:
        got = await listed(p)
        assert [t["name"] for t in got.tools] == ["get_current_time", "convert_time"]
        answer = await call(p, "get_current_time", {"timezone": "UTC"})
        assert isinstance(answer, CallAnswered), answer
        assert "UTC" in answer.result["content"][0]["text"]
        call_line = next(line for line in p.sent.lines() if b"tools/call" in line)
        assert p.connection.client.request_sha256 == hashlib.sha256(call_line).hexdigest()
        assert answer.response_sha256 == hashlib.sha256(answer_line(p)).hexdigest()
        await p.connection.close_stdin()
        with trio.fail_after(ROOMY):
            assert await p.process.wait() == 0
    assert got.protocol == ("2026-07-28" if protocol in ("auto", "2026-07-28") else "2025-11-25")


# -- the fake: eras and lists ---------------------------------------------------------------


async def test_a_well_behaved_fake_is_modern_and_answers() -> None:
    async with peer(fake(), "auto") as p:
        got = await listed(p)
        assert got.protocol == "2026-07-28"
        assert got.server_info is not None and got.server_info.name == "fake"
        answer = await call(p)
        assert isinstance(answer, CallAnswered)
        assert answer.result["content"] == [{"type": "text", "text": "hi"}]
        assert answer.response_sha256 == hashlib.sha256(answer_line(p)).hexdigest()
    assert b'"method":"server/discover"' in p.sent.lines()[0]


async def test_a_legacy_server_is_decided_legacy_and_a_fresh_one_initializes() -> None:
    async with peer(fake("legacy"), "auto") as p:
        with trio.fail_after(ROOMY):
            era = await p.connection.negotiate(start_timeout_s=ROOMY, discover_timeout_s=ROOMY)
        assert era == EraDecided(era="legacy")
    async with peer(fake("legacy"), "auto-legacy") as p:
        got = await listed(p)
        assert got.protocol == "2025-11-25" and got.instructions == "A fake server for tests."
        assert isinstance(await call(p, "add", {"a": 2, "b": 3}), CallAnswered)
    assert p.sent.lines()[1] == b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


@pytest.mark.parametrize("behaviour", ["description", "added", "renamed", "schema",
                                       "annotation", "bidi"])
async def test_a_changed_list_is_read_as_served(behaviour: str) -> None:
    async with peer(fake(), "2026-07-28") as p:
        before = pin_tools((await listed(p)).tools, ())
    async with peer(fake(behaviour), "2026-07-28") as p:
        after = pin_tools((await listed(p)).tools, ())
    statuses = {s.name: s.status for s in compare_tools(before, after)}
    assert set(statuses.values()) != {"same"}
    if behaviour == "bidi":
        assert "\u202e" in next(t.raw["description"] for t in after if t.name == "echo")


async def test_a_list_of_pages_is_read_whole() -> None:
    async with peer(fake("pages"), "2025-11-25") as p:
        got = await listed(p)
    assert got.pages == 2 and [t["name"] for t in got.tools] == ["echo", "add"]
    assert b'"cursor":"1"' in p.sent.lines()[-1]


async def test_another_version_on_the_second_start_names_it(tmp_path: Path) -> None:
    state = str(tmp_path / "starts")
    async with peer(fake("second_protocol", state=state), "2025-11-25") as p:
        assert (await listed(p)).protocol == "2025-11-25"
    async with peer(fake("second_protocol", state=state), "2025-11-25") as p:
        with trio.fail_after(ROOMY):
            got = await p.connection.negotiate(start_timeout_s=ROOMY)
    assert isinstance(got, Unavailable) and got.named_version == "2025-06-18"


@pytest.mark.parametrize(("behaviour", "protocol"), [
    ("other_protocol", "auto-legacy"), ("unsupported", "auto"), ("modern_only", "auto-legacy"),
    ("exit_start", "auto-legacy"), ("exit_initialize", "2025-11-25"), ("exit_list", "auto"),
])
async def test_a_server_that_cannot_start_is_unavailable(behaviour: str,
                                                         protocol: ClientProtocol) -> None:
    async with peer(fake(behaviour), protocol) as p:
        with trio.fail_after(ROOMY):
            got = await p.connection.negotiate(start_timeout_s=ROOMY, discover_timeout_s=ROOMY)
    assert isinstance(got, Unavailable), got
    assert not got.protocol_violation


async def test_an_exit_during_the_era_probe_is_legacy() -> None:
    async with peer(fake("exit_start"), "auto") as p:
        with trio.fail_after(ROOMY):
            got = await p.connection.negotiate(start_timeout_s=ROOMY, discover_timeout_s=ROOMY)
    assert got == EraDecided(era="legacy")


# -- the fake: the call -----------------------------------------------------------------------


@pytest.mark.parametrize(("behaviour", "kind"), [
    ("noise", "protocol"), ("long_line", "output_too_large"), ("surrogate", "protocol"),
    ("duplicate_keys", "protocol"), ("batch", "protocol"), ("flood", "protocol"),
    ("input_required", "input_required"), ("error", "mcp_error"), ("unknown_id", "protocol"),
    ("exit_call", "crashed"),
])
async def test_a_misbehaving_call_fails_as_specified(behaviour: str, kind: str) -> None:
    async with peer(fake(behaviour), "2026-07-28", output_max_bytes=4096) as p:
        await listed(p)
        got = await call(p)
    assert isinstance(got, CallFailed), got
    assert got.kind == kind
    if kind in ("mcp_error", "input_required"):
        assert got.response_sha256 == hashlib.sha256(answer_line(p)).hexdigest()


@pytest.mark.parametrize(("behaviour", "protocol", "refused"), [
    ("sampling", "2026-07-28", ["sampling/createMessage"]),
    ("elicitation", "2025-11-25", ["elicitation/create"]),
    ("roots", "2025-06-18", ["roots/list"]),
    ("ping", "2025-11-25", []),
    ("ping", "2026-07-28", ["ping"]),
])
async def test_server_requests_are_refused_but_a_legacy_ping(
        behaviour: str, protocol: ClientProtocol, refused: list[str]) -> None:
    async with peer(fake(behaviour), protocol) as p:
        await listed(p)
        got = await call(p)
    assert isinstance(got, CallAnswered), got
    assert p.connection.refused == refused
    answers = [line for line in p.sent.lines() if b'"srv-1"' in line]
    assert len(answers) == 1
    assert (b"-32601" in answers[0]) == bool(refused)


async def test_a_flood_under_the_bound_is_ignored() -> None:
    async with peer(fake("flood", flood=2000), "2026-07-28") as p:
        await listed(p)
        assert isinstance(await call(p), CallAnswered)


async def test_an_error_result_and_a_second_answer() -> None:
    async with peer(fake("is_error", "twice"), "2026-07-28") as p:
        await listed(p)
        got = await call(p)
    assert isinstance(got, CallAnswered) and got.is_error is True
    assert got.result["content"][0]["text"] == "hi"


async def test_an_exit_after_the_answer_keeps_the_answer() -> None:
    async with peer(fake("exit_answered"), "2026-07-28") as p:
        await listed(p)
        assert isinstance(await call(p), CallAnswered)
        with trio.fail_after(ROOMY):
            assert await p.process.wait() == 0


async def test_stderr_is_kept_bounded_and_escaped() -> None:
    async with peer(fake(), "2026-07-28") as p:
        await listed(p)
        await p.connection.close_stdin()
        with trio.fail_after(ROOMY):
            await p.process.wait()
    tail = StderrTail(keep=8)
    async with trio.open_nursery() as nursery:
        send, receive = trio.testing.memory_stream_one_way_pair()
        nursery.start_soon(tail.read_all, receive)
        await send.send_all(b"\x1b[31mred\nand more")
        await send.aclose()
    assert tail.total == 17 and tail.shown().endswith("[9 more bytes not kept]")
    assert "\x1b" not in tail.shown()
    assert "fake mcp server" in p.stderr.shown()


# -- timers, on the autojump clock ------------------------------------------------------------


def real_time(clock: trio.testing.MockClock) -> None:
    clock.autojump_threshold = math.inf
    clock.rate = 1.0


def jumping(clock: trio.testing.MockClock) -> None:
    clock.rate = 0.0
    clock.autojump_threshold = 0.0


@pytest.mark.parametrize("behaviour", ["silent_discover", "late_discover"])
async def test_no_answer_to_the_era_probe_in_2_s_is_legacy(
        behaviour: str, autojump_clock: trio.testing.MockClock) -> None:
    async with peer(fake(behaviour), "auto") as p:
        start = trio.current_time()
        got = await p.connection.negotiate(start_timeout_s=20)
        assert got == EraDecided(era="legacy")
        assert trio.current_time() - start == pytest.approx(2.0)


async def test_silence_at_start_is_unavailable_at_start_timeout(
        autojump_clock: trio.testing.MockClock) -> None:
    async with peer(fake("silent"), "2025-11-25") as p:
        start = trio.current_time()
        got = await p.connection.negotiate(start_timeout_s=20)
        assert isinstance(got, Unavailable) and "start_timeout_ms" in got.reason
        assert trio.current_time() - start == pytest.approx(20.0)


async def test_no_answer_to_the_call_times_out_and_cancels(
        autojump_clock: trio.testing.MockClock) -> None:
    real_time(autojump_clock)
    async with peer(fake("no_answer", "stay_on_eof"), "2026-07-28") as p:
        await listed(p)
        jumping(autojump_clock)
        start = trio.current_time()
        got = await p.connection.call(7, "echo", {"text": "hi"}, call_timeout_s=60)
        assert got == CallTimedOut()
        assert trio.current_time() - start == pytest.approx(60.0)
        assert p.sent.lines()[-1] == (b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                                      b'"params":{"reason":"timeout","requestId":"bx-call-7"}}')
