"""bxctl's blocking loop.sock client (boxmaker/bxctl/_loop_client.py), the one `bxctl chat
--say` uses, against a real Unix socket served by a thread: the frames in order with the
JSON received, frames that do not decode said and skipped, the uid checked before
anything is sent, deadlines, a peer that never answers, a header over the limit; and, for
each fault, the same words as the interactive chat's trio client."""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.bxctl._admin_client import DaemonUnreachable
from boxmaker.bxctl._loop_client import Undecodable, new_request_id, open_request
from boxmaker.bxctl._loop_trio_client import open_request as open_trio_request
from boxmaker.proto._framing import MAX_FRAME
from boxmaker.proto.wire._wire_loop import (
    SayRequest,
    TextEvent,
    decode_loop_request,
    encode_loop_frame,
)
from tests.fakes.brokerd import frame
from tests.fakes.framed_server import Answer, Body, FramedServer, Raw

UID = os.getuid()
SAY = SayRequest(conversation="c-1", text="hi")


@pytest.fixture
def loopd(tmp_path: Path) -> Iterator[Callable[[Answer], FramedServer]]:
    made: list[FramedServer] = []

    def start(answer: Answer) -> FramedServer:
        fake = FramedServer(tmp_path / f"loop{len(made)}.sock", answer)
        made.append(fake)
        return fake

    yield start
    for fake in made:
        fake.close()


def _turn(path: Path, *, uid: int = UID, deadline: float | None = None) -> list[object]:
    with open_request(path, SAY, loopd_uid=uid) as link:
        return list(link.frames(deadline))


def _trio_failure(path: Path, *, uid: int = UID) -> DaemonUnreachable:
    async def main() -> DaemonUnreachable:
        try:
            async with open_trio_request(path, SAY, loopd_uid=uid) as conn:
                async for _ in conn.frames():
                    pass
        except DaemonUnreachable as exc:
            return exc
        raise AssertionError("the trio client did not fail")

    return trio.run(main)


def test_frames_in_order_with_the_json_received(loopd: Callable[[Answer], FramedServer]) -> None:
    def script(request: dict[str, Any]) -> list[Body]:
        request_id = request["id"]
        return [encode_loop_frame(request_id, TextEvent(delta="one")),
                b"not json",
                encode_loop_frame(request_id + 1, TextEvent(delta="other")),
                encode_loop_frame(request_id, TextEvent(delta="two"))]

    fake = loopd(script)
    out = _turn(fake.path)
    request = decode_loop_request(fake.received[0])
    assert request.body == SAY
    assert len(out) == 4
    first = out[0]
    assert isinstance(first, tuple) and first[1] == TextEvent(delta="one")
    assert first[0] == {"id": request.id, "event": {"text": {"delta": "one"}}}
    assert isinstance(out[1], Undecodable)
    assert out[2] == Undecodable("it answers another request")
    assert isinstance(out[3], tuple) and out[3][1] == TextEvent(delta="two")


def test_the_request_is_the_trio_clients(loopd: Callable[[Answer], FramedServer]) -> None:
    """The same message on the wire, whichever client sends it (a fresh 63-bit id each)."""
    fake = loopd(lambda request: [])
    _turn(fake.path)

    async def with_trio() -> None:
        async with open_trio_request(fake.path, SAY, loopd_uid=UID) as conn:
            async for _ in conn.frames():
                pass

    trio.run(with_trio)
    blocking, trio_sent = (json.loads(body) for body in fake.received)
    assert blocking.keys() == trio_sent.keys() and blocking["say"] == trio_sent["say"]
    assert blocking["id"] != trio_sent["id"]
    assert all(0 <= new_request_id() < 2**63 for _ in range(100))


def test_a_socket_of_another_uid_is_refused_before_sending(
        loopd: Callable[[Answer], FramedServer]) -> None:
    fake = loopd(lambda request: [])
    with pytest.raises(DaemonUnreachable) as caught:
        _turn(fake.path, uid=UID + 1)
    assert not caught.value.sent and "refusing to talk to it" in caught.value.message
    assert caught.value.message == _trio_failure(fake.path, uid=UID + 1).message
    assert fake.received == []


def test_a_connection_cut_inside_a_frame_ends_the_turn(
        loopd: Callable[[Answer], FramedServer]) -> None:
    def script(request: dict[str, Any]) -> list[Body]:
        return [Raw(frame(encode_loop_frame(request["id"], TextEvent(delta="cut")))[:-3])]

    fake = loopd(script)
    with pytest.raises(DaemonUnreachable) as caught:
        _turn(fake.path)
    assert caught.value.sent and "the turn may or may not have run" in caught.value.message
    assert caught.value.message == (
        f"loopd at {str(fake.path)!r} broke the connection (the peer closed the connection "
        "inside a frame); the turn may or may not have run: `bxctl chat` shows the "
        "conversation")
    assert caught.value.message == _trio_failure(fake.path).message


def test_a_header_over_the_limit_ends_the_turn_at_once(
        loopd: Callable[[Answer], FramedServer]) -> None:
    """No body is waited for: the fake keeps the connection open and sends none, and the
    deadline is far (a wait for the body would end at it, as a timeout)."""
    def script(request: dict[str, Any]) -> Iterator[Body]:
        yield Raw(struct.pack(">I", MAX_FRAME + 1))
        fake.closing.wait(10)

    fake = loopd(script)
    with pytest.raises(DaemonUnreachable) as caught:
        _turn(fake.path, deadline=time.monotonic() + 30)
    assert caught.value.sent and "sent a frame that does not decode (frame length " \
        f"{MAX_FRAME + 1} exceeds the limit of {MAX_FRAME} bytes)" in caught.value.message


def test_the_same_words_as_trio_for_a_header_over_the_limit(
        loopd: Callable[[Answer], FramedServer]) -> None:
    fake = loopd(lambda request: [Raw(struct.pack(">I", MAX_FRAME + 1))])
    with pytest.raises(DaemonUnreachable) as caught:
        _turn(fake.path)
    assert caught.value.message == _trio_failure(fake.path).message


def test_a_loopd_that_never_answers_meets_the_deadline(
        loopd: Callable[[Answer], FramedServer]) -> None:
    def never(request: dict[str, Any]) -> list[Body]:
        fake.closing.wait(10)
        return []

    fake = loopd(never)
    with pytest.raises(DaemonUnreachable) as caught:
        _turn(fake.path, deadline=time.monotonic() + 0.05)
    assert caught.value.sent
    assert caught.value.message.startswith(f"loopd at {str(fake.path)!r} did not answer in "
                                           "time; the turn may or may not have run")


def test_a_listener_that_never_accepts_meets_the_deadline(tmp_path: Path) -> None:
    path = tmp_path / "loop.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        with pytest.raises(DaemonUnreachable, match="did not answer in time"):
            _turn(path, deadline=time.monotonic() + 0.05)


def test_a_clean_close_ends_the_frames(loopd: Callable[[Answer], FramedServer]) -> None:
    def script(request: dict[str, Any]) -> list[Body]:
        return [encode_loop_frame(request["id"], TextEvent(delta="only"))]

    fake = loopd(script)
    out = _turn(fake.path)
    assert len(out) == 1


def test_no_socket(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnreachable, match="no such socket") as caught:
        _turn(tmp_path / "absent")
    assert not caught.value.sent
    assert caught.value.message == _trio_failure(tmp_path / "absent").message


def test_a_refused_connection(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))  # bound, never listening: connections are refused
        with pytest.raises(DaemonUnreachable, match="connection refused") as caught:
            _turn(path)
        assert caught.value.message == _trio_failure(path).message
