"""The turn loop in process: the fake llama-server and a scripted broker.sock, mock clock."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._http import InferenceStreamError
from boxmaker._http.client import LlamaClient
from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.loopd._broker_client import BrokerPort
from boxmaker.loopd._conversations import ConversationStore
from boxmaker.loopd._tools import tool_schemas
from boxmaker.loopd._turn import CoreUnreadable, Turn, TurnSettings, TurnTimeout
from boxmaker.proto._convert import U64
from boxmaker.proto._framing import FrameDecoder
from boxmaker.proto.wire._wire import format_ts
from boxmaker.proto.wire._wire_broker import (
    Pending,
    Result,
    decode_broker_request,
    encode_broker_answer,
)
from boxmaker.proto.wire._wire_loop import Event, ToolDeniedEvent, ToolResultEvent
from tests.fakes.llama_server import FakeLlamaServer

EPOCH = dt.datetime(2026, 11, 29, 7, 0, tzinfo=dt.UTC)
BrokerScript = Callable[[trio.SocketStream, int], Awaitable[None]]


def wall() -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=trio.current_time())


def echo_call(call_id: str, arguments: str = '{"text": "hi"}') -> dict[str, Any]:
    return {"steps": [{"role": "assistant"}, {"text": "calling"},
                      {"tool_call": {"index": 0, "id": call_id, "name": "echo",
                                     "arguments": [arguments]}},
                      {"finish": "tool_calls"}, {"usage": True}]}


def text(words: str) -> dict[str, Any]:
    return {"steps": [{"role": "assistant"}, {"text": words}, {"finish": "stop"},
                      {"usage": True}]}


async def ok_answer(stream: trio.SocketStream, request_id: int) -> None:
    result = Result(status="ok", output={"text": "hi"}, label="public",  # type: ignore[arg-type]
                    untrusted=False)
    await send_frame(stream, encode_broker_answer(request_id, result))


async def serve_broker(path: Path, script: BrokerScript, calls: list[str],
                       task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    path.unlink(missing_ok=True)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(8)
    task_status.started()

    async def one(stream: trio.SocketStream) -> None:
        async with stream:
            body = await receive_frame(stream, FrameDecoder())
            assert body is not None
            request = decode_broker_request(body)
            calls.append(request.call.tool)
            await script(stream, request.id)

    await trio.serve_listeners(one, [trio.SocketListener(sock)])


class Harness:
    def __init__(self, tmp_path: Path, turns: list[dict[str, Any]], broker: BrokerScript,
                 *, max_rounds: int = 8, turn_timeout_s: float = 1800) -> None:
        self.tmp_path = tmp_path
        self.fake = FakeLlamaServer({"turns": turns})
        self.broker_script = broker
        self.broker_calls: list[str] = []
        self.events: list[Event] = []
        self.store = ConversationStore(tmp_path / "conversations", fsync=False)
        self.core = tmp_path / "core.md"
        self.max_rounds = max_rounds
        self.turn_timeout_s = turn_timeout_s

    async def run(self, text_in: str = "hello") -> Any:
        async with trio.open_nursery() as nursery:
            endpoint = await nursery.start(self.fake.serve)
            sock = self.tmp_path / "broker.sock"
            await nursery.start(serve_broker, sock, self.broker_script, self.broker_calls)

            send_events, receive_events = trio.open_memory_channel[Event](0)

            async def collect() -> None:  # until the turn closes its channel
                async for event in receive_events:
                    self.events.append(event)

            nursery.start_soon(collect)
            turn = Turn(
                settings=TurnSettings(model="local", slot=0, temperature=0.7,
                                      tools=tool_schemas(["echo"]), max_tokens=None,
                                      max_rounds=self.max_rounds,
                                      turn_timeout_s=self.turn_timeout_s, core_md=self.core),
                store=self.store, llama=LlamaClient(endpoint),
                broker=BrokerPort(socket_path=sock, timeout_ms=60_000,
                                  brokerd_uid=os.getuid(), wall_clock=wall),
                events=send_events,
            )
            outcome: Any = None
            failure: Exception | None = None
            try:
                outcome = await turn.run("c1", text_in)
            except Exception as exc:  # re-raised below, outside the nursery's group
                failure = exc
            nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return outcome


async def test_max_rounds_ends_the_turn(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a", '{"text": "one"}'),
                                 echo_call("b", '{"text": "two"}'),
                                 echo_call("c", '{"text": "three"}')], ok_answer,
                      max_rounds=2)
    with trio.fail_after(30):
        done = await harness.run()
    assert (done.finish, done.rounds) == ("max_rounds", 2)
    assert harness.broker_calls == ["echo", "echo"]
    roles = [m.role for m in harness.store.load("c1")]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]
    assert [type(e) for e in harness.events if isinstance(e, ToolResultEvent)] == [
        ToolResultEvent, ToolResultEvent]


async def test_core_md_is_the_system_message_and_missing_means_none(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [text("one"), text("two")], ok_answer)
    with trio.fail_after(30):
        await harness.run()
    assert harness.fake.chat_bodies[0]["messages"][0]["role"] == "user"
    harness.core.write_text("Be brief.", encoding="utf-8")
    with trio.fail_after(30):
        await harness.run("again")
    first = harness.fake.chat_bodies[1]["messages"][0]
    assert first == {"role": "system", "content": "Be brief."}


async def test_core_md_not_utf8_fails_the_turn(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [text("never")], ok_answer)
    harness.core.write_bytes(b"\xff\xfe not text")
    with trio.fail_after(30), pytest.raises(CoreUnreadable, match=r"is not UTF-8 \(byte 0\)$"):
        await harness.run()


async def test_arguments_that_are_not_an_object_never_reach_brokerd(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [echo_call("a", "[1, 2"), text("ok")], ok_answer)
    with trio.fail_after(30):
        done = await harness.run()
    assert done.finish == "stop" and harness.broker_calls == []
    [denied] = [e for e in harness.events if isinstance(e, ToolDeniedEvent)]
    assert (denied.code, denied.runbook) == ("bad_args", None)
    tool_message = harness.store.load("c1")[2]
    assert tool_message.role == "tool" and "Do not retry" in (tool_message.content or "")


async def test_an_interrupted_answer_is_kept_as_received(tmp_path: Path) -> None:
    broken = {"steps": [{"role": "assistant"}, {"text": "half an ans"},
                        {"error": {"code": 500, "message": "boom", "type": "server_error"}}]}
    harness = Harness(tmp_path, [broken], ok_answer)
    with trio.fail_after(30), pytest.raises(InferenceStreamError):
        await harness.run()
    last = harness.store.load("c1")[-1]
    assert (last.role, last.content, last.interrupted) == ("assistant", "half an ans", True)


async def test_turn_timeout_does_not_count_the_wait_for_approval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # real sockets: jump only once nothing has moved for a while in real time,
    # so that bytes in flight in the kernel are not mistaken for idleness
    autojump_clock.autojump_threshold = 0.05
    async def slow_owner(stream: trio.SocketStream, request_id: int) -> None:
        pending = Pending(approval_id=U64(7), grant="g",
                          expires_at=format_ts(wall() + dt.timedelta(seconds=600)))
        await send_frame(stream, encode_broker_answer(request_id, pending))
        await trio.sleep(300)  # the owner takes five minutes
        await ok_answer(stream, request_id)

    harness = Harness(tmp_path, [echo_call("a"), text("done")], slow_owner, turn_timeout_s=60)
    done = await harness.run()
    assert done.finish == "stop"


async def test_turn_timeout_counts_everything_else(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # real sockets: jump only once nothing has moved for a while in real time,
    # so that bytes in flight in the kernel are not mistaken for idleness
    autojump_clock.autojump_threshold = 0.05
    async def slow_tool(stream: trio.SocketStream, request_id: int) -> None:
        await trio.sleep(50)  # within the broker deadline (60 s), past the turn's (30 s)
        await ok_answer(stream, request_id)

    harness = Harness(tmp_path, [echo_call("a"), text("never")], slow_tool, turn_timeout_s=30)
    with pytest.raises(TurnTimeout):
        await harness.run()


def test_the_result_event_carries_a_commands_exit_code_only() -> None:
    from boxmaker.loopd._turn import exit_code
    assert exit_code("run_command", {"exit": 3, "stdout": ""}) == 3
    assert exit_code("run_command", {"exit": True}) is None
    assert exit_code("run_command", {"exit": 300}) is None
    assert exit_code("run_command", None) is None
    assert exit_code("read_file", {"exit": 3}) is None  # its result has no exit field
    assert exit_code("no_such_tool", {"exit": 3}) is None
