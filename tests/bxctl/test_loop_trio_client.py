"""bxctl's trio loop.sock client (boxmaker/bxctl/_loop_trio_client.py) against a real Unix
socket served by trio: the uid is checked before anything is sent, frames that
do not decode are reported and reading goes on, a broken stream ends it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.bxctl._admin_client import DaemonUnreachable
from boxmaker.bxctl._loop_client import Undecodable
from boxmaker.bxctl._loop_trio_client import open_request
from boxmaker.proto._framing import FrameDecoder, encode_frame
from boxmaker.proto.wire._wire_loop import (
    SayRequest,
    TextEvent,
    decode_loop_request,
    encode_loop_frame,
)

Serve = Callable[[trio.SocketStream, int], Awaitable[None]]


async def _listen(path: Path, serve: Serve, received: list[bytes],
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    with trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM) as listener:
        await listener.bind(os.fsdecode(path))
        listener.listen(4)
        task_status.started()
        while True:
            sock, _ = await listener.accept()
            stream = trio.SocketStream(sock)
            async with stream:
                body = await receive_frame(stream, FrameDecoder())
                if body is None:
                    continue
                received.append(body)
                await serve(stream, decode_loop_request(body).id)


async def _turn(tmp_path: Path, serve: Serve, *, uid: int | None = None
                ) -> tuple[list[object], list[bytes]]:
    path = tmp_path / "loop.sock"
    received: list[bytes] = []
    out: list[object] = []
    failure: DaemonUnreachable | None = None
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(_listen, path, serve, received)
            try:
                async with open_request(path, SayRequest(conversation="c-1", text="hi"),
                                        loopd_uid=os.getuid() if uid is None else uid) as conn:
                    async for item in conn.frames():
                        out.append(item)
            except DaemonUnreachable as exc:  # raised outside the nursery, unwrapped
                failure = exc
            finally:
                nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return out, received


async def test_frames_in_order_with_the_json_received(tmp_path: Path) -> None:
    async def serve(stream: trio.SocketStream, request_id: int) -> None:
        await send_frame(stream, encode_loop_frame(request_id, TextEvent(delta="one")))
        await send_frame(stream, b"not json")
        await send_frame(stream, encode_loop_frame(request_id + 1, TextEvent(delta="other")))
        await send_frame(stream, encode_loop_frame(request_id, TextEvent(delta="two")))

    out, received = await _turn(tmp_path, serve)
    assert decode_loop_request(received[0]).body == SayRequest(conversation="c-1", text="hi")
    assert len(out) == 4
    first = out[0]
    assert isinstance(first, tuple) and first[1] == TextEvent(delta="one")
    assert first[0] == {"id": decode_loop_request(received[0]).id, "event": {"text":
                                                                          {"delta": "one"}}}
    assert isinstance(out[1], Undecodable)
    assert out[2] == Undecodable("it answers another request")
    assert isinstance(out[3], tuple) and out[3][1] == TextEvent(delta="two")


async def test_a_socket_of_another_uid_is_refused_before_sending(tmp_path: Path) -> None:
    async def serve(stream: trio.SocketStream, request_id: int) -> None:
        raise AssertionError("nothing should arrive")

    with pytest.raises(DaemonUnreachable) as caught:
        await _turn(tmp_path, serve, uid=os.getuid() + 1)
    assert not caught.value.sent and "refusing to talk to it" in caught.value.message


async def test_a_connection_cut_inside_a_frame_ends_the_turn(tmp_path: Path) -> None:
    async def serve(stream: trio.SocketStream, request_id: int) -> None:
        frame = encode_loop_frame(request_id, TextEvent(delta="cut"))
        await stream.send_all(encode_frame(frame)[:-3])

    with pytest.raises(DaemonUnreachable) as caught:
        await _turn(tmp_path, serve)
    assert caught.value.sent and "the turn may or may not have run" in caught.value.message


async def test_no_socket(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnreachable, match="no such socket") as caught:
        async with open_request(tmp_path / "absent", SayRequest(conversation="c", text="x"),
                                loopd_uid=os.getuid()):
            pass
    assert not caught.value.sent
