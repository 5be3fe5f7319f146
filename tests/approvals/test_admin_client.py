"""The approval page's admin.sock client (boxmaker/approvals/_admin_client.py)
against a real Unix socket served by trio: the uid is checked before anything
is sent, every failure is AdminUnreachable, the 30 s bound on the mock clock."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.approvals._admin_client import ANSWER_SECONDS, AdminPort, AdminUnreachable
from boxmaker.proto._framing import FrameDecoder
from boxmaker.proto.wire._wire import Ok
from boxmaker.proto.wire._wire_admin import StatusRequest, decode_admin_request, encode_admin_answer

Reply = Callable[[trio.SocketStream, bytes], Awaitable[None]]


async def _ask(tmp_path: Path, reply: Reply, *, uid: int | None = None
               ) -> tuple[object, list[bytes]]:
    path = tmp_path / "admin.sock"
    received: list[bytes] = []
    result: object = None

    async def listen(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM) as listener:
            await listener.bind(os.fsdecode(path))
            listener.listen(1)
            task_status.started()
            while True:
                sock, _ = await listener.accept()
                async with trio.SocketStream(sock) as stream:
                    body = await receive_frame(stream, FrameDecoder())
                    if body is not None:
                        received.append(body)
                        await reply(stream, body)

    async with trio.open_nursery() as nursery:
        await nursery.start(listen)
        port = AdminPort(path, brokerd_uid=os.getuid() if uid is None else uid)
        try:
            result = await port.ask(StatusRequest())
        except AdminUnreachable as exc:
            result = exc
        nursery.cancel_scope.cancel()
    return result, received


async def ok(stream: trio.SocketStream, body: bytes) -> None:
    await send_frame(stream, encode_admin_answer(decode_admin_request(body).id, Ok()))


async def test_a_question_and_its_answer(tmp_path: Path) -> None:
    result, received = await _ask(tmp_path, ok)
    assert result == Ok()
    assert decode_admin_request(received[0]).body == StatusRequest()


async def test_another_uid_gets_nothing(tmp_path: Path) -> None:
    result, received = await _ask(tmp_path, ok, uid=os.getuid() + 1)
    assert isinstance(result, AdminUnreachable) and received == []
    assert f"served by uid {os.getuid()}" in str(result)


async def nothing(stream: trio.SocketStream, body: bytes) -> None:
    return None


async def garbage(stream: trio.SocketStream, body: bytes) -> None:
    await send_frame(stream, b"not an answer")


async def forever(stream: trio.SocketStream, body: bytes) -> None:
    await trio.sleep_forever()


@pytest.mark.parametrize(("reply", "why"), [
    (nothing, "closed the connection without an answer"),
    (garbage, "does not decode"),
])
async def test_failures_after_sending(tmp_path: Path, reply: Reply, why: str) -> None:
    result, received = await _ask(tmp_path, reply)
    assert isinstance(result, AdminUnreachable) and why in str(result) and received


async def test_no_answer_within_the_bound(tmp_path: Path,
                                          autojump_clock: trio.abc.Clock) -> None:
    start = trio.current_time()
    result, _ = await _ask(tmp_path, forever)
    assert isinstance(result, AdminUnreachable)
    assert f"did not answer within {ANSWER_SECONDS:g} s" in str(result)
    assert trio.current_time() - start >= ANSWER_SECONDS


async def test_no_socket(tmp_path: Path) -> None:
    with pytest.raises(AdminUnreachable, match="cannot reach brokerd"):
        await AdminPort(tmp_path / "absent", brokerd_uid=os.getuid()).ask(StatusRequest())
