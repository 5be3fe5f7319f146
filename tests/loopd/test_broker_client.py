"""BrokerPort against a scripted broker.sock server (real Unix sockets, mock clock)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.loopd._broker_client import BrokerOutcome, BrokerPort, BrokerUnavailable
from boxmaker.proto._convert import U64
from boxmaker.proto._framing import FrameDecoder
from boxmaker.proto.wire._wire import format_ts
from boxmaker.proto.wire._wire_broker import (
    Denied,
    ErrorAnswer,
    Pending,
    Result,
    ToolItem,
    ToolsAnswer,
    decode_broker_request,
    encode_broker_answer,
)

Script = Callable[[trio.SocketStream, int], Awaitable[None]]
EPOCH = dt.datetime(2026, 11, 29, 7, 0, tzinfo=dt.UTC)


async def answers_of(port: BrokerPort, **call: Any) -> tuple[list[Pending], BrokerOutcome]:
    """Pull the call's answers as the turn does: the pendings, then the outcome (last)."""
    pendings: list[Pending] = []
    outcomes: list[BrokerOutcome] = []
    async with aclosing(port.call(**call)) as answers:
        async for answer in answers:
            if isinstance(answer, Pending):
                assert not outcomes, "a pending after the outcome"
                pendings.append(answer)
            else:
                outcomes.append(answer)
    (outcome,) = outcomes
    return pendings, outcome


def trio_wall_clock() -> dt.datetime:
    """A wall clock that moves with trio's (mock) clock."""
    return EPOCH + dt.timedelta(seconds=trio.current_time())


async def serve_script(
    path: Path,
    script: Script,
    seen: list[str],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(8)
    listener = trio.SocketListener(sock)
    task_status.started()
    async with listener:
        stream = await listener.accept()
        async with stream:
            body = await receive_frame(stream, FrameDecoder())
            assert body is not None
            request = decode_broker_request(body)
            seen.append(getattr(request.call, "tool", "tools query"))
            try:
                await script(stream, request.id)
            except trio.BrokenResourceError:
                seen.append("client reset")
                return
            # whatever happens next, note whether the client closed its end
            try:
                while await stream.receive_some(100):
                    pass
                seen.append("client closed")
            except trio.BrokenResourceError:
                seen.append("client reset")
            except trio.ClosedResourceError:
                seen.append("server closed")


async def call_with(
    tmp_path: Path, script: Script, *, uid: int | None = None, timeout_ms: int = 60_000
) -> tuple[object, list[str]]:
    path = tmp_path / "broker.sock"
    seen: list[str] = []
    port = BrokerPort(
        socket_path=path,
        timeout_ms=timeout_ms,
        brokerd_uid=os.getuid() if uid is None else uid,
        wall_clock=trio_wall_clock,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_script, path, script, seen)
        started = trio.current_time()
        pendings, outcome = await answers_of(port, session="default", tool="echo",
                                             args={"text": "hi"})
        seen.append(f"answered after {trio.current_time() - started:.2f} s")
    seen.extend(f"pending {p.approval_id}" for p in pendings)
    return outcome, seen


def result_answer() -> Result:
    return Result(
        status="ok",
        output={"text": "hi"},
        label="public",  # type: ignore[arg-type]
        untrusted=False,
    )


async def test_a_result_passes_through(tmp_path: Path) -> None:
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, encode_broker_answer(request_id, result_answer()))

    with trio.fail_after(10):
        outcome, seen = await call_with(tmp_path, script)
    assert outcome == result_answer()
    assert seen[0] == "echo" and "client closed" in seen


async def test_a_denial_passes_through(tmp_path: Path) -> None:
    denied = Denied(code="no_grant", reason="no grant covers echo", grant=None, runbook=None)

    async def script(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, encode_broker_answer(request_id, denied))

    with trio.fail_after(10):
        outcome, _ = await call_with(tmp_path, script)
    assert outcome == denied


async def test_missing_socket(tmp_path: Path) -> None:
    port = BrokerPort(
        socket_path=tmp_path / "nothing.sock", timeout_ms=1000, brokerd_uid=os.getuid()
    )

    with trio.fail_after(10):
        pendings, outcome = await answers_of(port, session="s", tool="echo", args={})
    assert not pendings
    assert isinstance(outcome, BrokerUnavailable) and "is missing" in outcome.reason


async def test_server_with_the_wrong_uid_is_refused_before_sending(tmp_path: Path) -> None:
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        raise AssertionError("the request must not be sent")

    path = tmp_path / "broker.sock"
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(1)
    port = BrokerPort(socket_path=path, timeout_ms=1000, brokerd_uid=os.getuid() + 4242)

    with trio.fail_after(10):
        pendings, outcome = await answers_of(port, session="s", tool="echo", args={})
    assert not pendings
    sock.close()
    assert isinstance(outcome, BrokerUnavailable)
    assert f"expected brokerd's uid {os.getuid() + 4242}" in outcome.reason


async def test_closed_without_answer(tmp_path: Path) -> None:
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        await stream.aclose()

    with trio.fail_after(10):
        outcome, _ = await call_with(tmp_path, script)
    assert isinstance(outcome, BrokerUnavailable) and "without an answer" in outcome.reason


async def test_garbage_answer(tmp_path: Path) -> None:
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, b'{"id": 1, "result": "\x1b[31m not an object"}')

    with trio.fail_after(10):
        outcome, _ = await call_with(tmp_path, script)
    assert isinstance(outcome, BrokerUnavailable) and "does not decode" in outcome.reason


async def test_answer_for_another_id(tmp_path: Path) -> None:
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, encode_broker_answer(request_id + 1, result_answer()))

    with trio.fail_after(10):
        outcome, _ = await call_with(tmp_path, script)
    assert isinstance(outcome, BrokerUnavailable) and "not " + str(outcome) != ""
    assert "answered request" in outcome.reason


async def test_deadline_is_one_scope_not_a_per_read_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # real sockets: jump only once nothing has moved for a while in real time,
    # so that bytes in flight in the kernel are not mistaken for idleness
    autojump_clock.autojump_threshold = 0.05
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        # a frame announced, then a trickle of its bytes that never completes it:
        # a per-read timeout would never fire
        await stream.send_all(b"\x00\x00\x10\x00")
        for _ in range(20):
            await stream.send_all(b" ")
            await trio.sleep(5)

    outcome, seen = await call_with(tmp_path, script, timeout_ms=30_000)
    assert isinstance(outcome, BrokerUnavailable) and "deadline" in outcome.reason
    assert "answered after 30.00 s" in seen
    assert "client closed" in seen or "client reset" in seen


async def test_pending_moves_the_deadline_to_expiry_plus_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # real sockets: jump only once nothing has moved for a while in real time,
    # so that bytes in flight in the kernel are not mistaken for idleness
    autojump_clock.autojump_threshold = 0.05
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        expires = trio_wall_clock() + dt.timedelta(seconds=600)
        pending = Pending(approval_id=U64(482913), expires_at=format_ts(expires), grant="g")
        await send_frame(stream, encode_broker_answer(request_id, pending))
        await trio.sleep(650)  # the owner approves late; the tool runs; within 600 + 60
        await send_frame(stream, encode_broker_answer(request_id, result_answer()))

    outcome, seen = await call_with(tmp_path, script, timeout_ms=60_000)
    assert outcome == result_answer()
    assert "pending 482913" in seen


async def test_an_absurd_expiry_is_bounded_to_a_day(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # real sockets: jump only once nothing has moved for a while in real time,
    # so that bytes in flight in the kernel are not mistaken for idleness
    autojump_clock.autojump_threshold = 0.05
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        pending = Pending(approval_id=U64(1), expires_at="9999-12-31T23:59:59.000000Z", grant="g")
        await send_frame(stream, encode_broker_answer(request_id, pending))

    outcome, seen = await call_with(tmp_path, script, timeout_ms=60_000)
    assert isinstance(outcome, BrokerUnavailable)
    assert "answered after 86400.00 s" in seen


@pytest.mark.parametrize("where", ["waiting for the answer", "at the pending"])
async def test_cancelling_the_call_closes_the_connection(tmp_path: Path, where: str) -> None:
    """bxctl went away: the turn is cancelled, the connection closes, brokerd sees EOF,
    whether the call was waiting for brokerd or the turn was showing the pending."""
    path = tmp_path / "broker.sock"
    seen: list[str] = []
    pending_seen = trio.Event()

    async def script(stream: trio.SocketStream, request_id: int) -> None:
        pending = Pending(approval_id=U64(7), expires_at=format_ts(trio_wall_clock()), grant="g")
        await send_frame(stream, encode_broker_answer(request_id, pending))

    port = BrokerPort(
        socket_path=path, timeout_ms=60_000, brokerd_uid=os.getuid(), wall_clock=trio_wall_clock
    )

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_script, path, script, seen)
            call_scope = trio.CancelScope()

            async def caller() -> None:
                with call_scope:
                    async with aclosing(port.call(session="s", tool="echo",
                                                  args={})) as answers:
                        async for answer in answers:
                            assert isinstance(answer, Pending)
                            pending_seen.set()
                            if where == "at the pending":
                                await trio.sleep_forever()

            nursery.start_soon(caller)
            await pending_seen.wait()
            call_scope.cancel()
    assert call_scope.cancelled_caught
    assert seen[-1] in ("client closed", "client reset")


# -- the tools query (12-tool-sources) ---------------------------------------------------

TOOLS = ToolsAnswer(digest="cd" * 32, items=[ToolItem(
    name="mcp.time.now", model_name="mcp__time__now", description="Now.",
    parameters={"type": "object"}, opaque=False)])


async def tools_with(tmp_path: Path, script: Script, *,
                     timeout_ms: int = 60_000) -> tuple[object, list[str]]:
    path = tmp_path / "broker.sock"
    seen: list[str] = []
    port = BrokerPort(socket_path=path, timeout_ms=timeout_ms, brokerd_uid=os.getuid())
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_script, path, script, seen)
        answer = await port.tools()
    return answer, seen


@pytest.mark.parametrize(("answer", "words"), [
    (TOOLS, None),
    (result_answer(), "not a tools answer"),
    (ErrorAnswer(code="forbidden", message="no", runbook=None), "with error forbidden"),
])
async def test_the_tools_query(tmp_path: Path, answer: Any, words: str | None) -> None:
    async def script(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, encode_broker_answer(request_id, answer))

    with trio.fail_after(10):
        got, seen = await tools_with(tmp_path, script)
    assert seen[0] == "tools query"
    if words is None:
        assert got == TOOLS
    else:
        assert isinstance(got, BrokerUnavailable) and words in got.reason


async def test_the_tools_query_fails_in_the_six_cases_words(tmp_path: Path) -> None:
    async def another_id(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, encode_broker_answer(request_id + 1, TOOLS))

    with trio.fail_after(10):
        got, _ = await tools_with(tmp_path, another_id)
        missing = await BrokerPort(socket_path=tmp_path / "none.sock", timeout_ms=1000,
                                   brokerd_uid=os.getuid()).tools()
    assert isinstance(got, BrokerUnavailable) and "answered request" in got.reason
    assert isinstance(missing, BrokerUnavailable) and "is missing" in missing.reason


async def test_the_tools_query_has_the_deadline(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    autojump_clock.autojump_threshold = 0.05

    async def silent(stream: trio.SocketStream, request_id: int) -> None:
        await trio.sleep(3600)

    with trio.fail_after(7200):
        got, _ = await tools_with(tmp_path, silent, timeout_ms=2000)
    assert isinstance(got, BrokerUnavailable) and "within the deadline (2000 ms)" in got.reason
