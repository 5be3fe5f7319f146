"""The connection shell of every framed socket (boxmaker/_sockets/_framed_server.py), over real
Unix sockets: the peer-uid gate (a real other uid, by setpriv), one frame with its
deadline, bad_frame/bad_version answers, failures contained, the EMFILE pause,
max_connections, a lost listener, shutdown."""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import socket
import struct
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._sockets._framed_server import (
    REQUEST_FRAME_SECONDS,
    FramedServer,
    FramedSocket,
    Wording,
    linger_close,
)
from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker._sockets._unix import ListenerLost, PeerCred, bind_unix_listener
from boxmaker.proto._framing import MAX_FRAME, FrameDecoder
from boxmaker.proto.wire._wire import Ok
from boxmaker.proto.wire._wire_admin import AdminRequest, decode_admin_request, encode_admin_answer

UID = os.getuid()
OTHER_UID = 65534
WORDING = Wording(
    forbidden="uid {uid} may not use {name}",
    bad_header="header: {error}",
    undecodable="body: {error}",
    bad_version=None,
    no_frame="nothing within {seconds:g} s",
)
STATUS = {"v": 1, "id": 3, "status": {}}


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def send(self, obj: dict[str, Any] | bytes) -> None:
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        await send_frame(self.stream, body)

    async def receive(self) -> dict[str, Any] | None:
        body = await receive_frame(self.stream, self.decoder)
        return None if body is None else json.loads(body)

    async def all(self) -> list[dict[str, Any]]:
        out = []
        with trio.fail_after(30):
            while (frame := await self.receive()) is not None:
                out.append(frame)
        await self.stream.aclose()
        return out


async def connect(path: Path) -> Client:
    return Client(await trio.open_unix_socket(os.fspath(path)))


class Served:
    """A shell serving one socket; `seen` lists the requests its handler got."""

    def __init__(self) -> None:
        self.seen: list[tuple[PeerCred, AdminRequest]] = []
        self.shell = FramedServer()

    async def answer_ok(self, stream: trio.SocketStream, peer: PeerCred,
                        request: AdminRequest) -> None:
        self.seen.append((peer, request))
        await send_frame(stream, encode_admin_answer(request.id, Ok()))


async def start(nursery: trio.Nursery, path: Path, *, allowed: frozenset[int] = frozenset({UID}),
                handle: Callable[[Served], Callable[..., Awaitable[None]]] | None = None,
                wording: Wording = WORDING, max_connections: int = 256,
                on_lost: Callable[[ListenerLost], None] | None = None,
                open_socket: bool = False) -> tuple[Served, Any]:
    served = Served()
    sock = bind_unix_listener(path, shared_dir=open_socket, open_socket=open_socket,
                              own_uid=UID)
    listener = trio.socket.from_stdlib_socket(sock)
    _LISTENERS.append(sock)  # closed after the test, outside trio
    framed = FramedSocket(name="test.sock", allowed_uids=allowed, decode=decode_admin_request,
                          handle=served.answer_ok if handle is None else handle(served),
                          wording=wording, max_connections=max_connections)
    await nursery.start(partial(served.shell.serve, listener, framed, on_lost=on_lost))
    return served, listener


_LISTENERS: list[Any] = []


@pytest.fixture(autouse=True)
def close_listeners() -> Iterator[None]:
    yield
    while _LISTENERS:
        _LISTENERS.pop().close()


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def test_a_request_reaches_the_handler_with_its_peer(tmp_path: Path,
                                                           nursery: trio.Nursery) -> None:
    served, _ = await start(nursery, tmp_path / "s" / "t.sock")
    client = await connect(tmp_path / "s" / "t.sock")
    await client.send(STATUS)
    assert await client.all() == [{"id": 3, "ok": {}}]
    [(peer, request)] = served.seen
    assert (peer.uid, peer.pid) == (UID, os.getpid())
    assert request.id == 3


@pytest.mark.parametrize(("data", "rid", "code", "message"), [
    (b"not json", None, "bad_frame", "body: "),
    (b'{"v":1,"id":5,"status":{},"x":1}', 5, "bad_frame", "body: "),
    (b'{"v":1,"id":6,"id":6,"status":{}}', None, "bad_frame", "body: "),
    (b'{"v":2,"id":9,"status":{}}', 9, "bad_version", "$.v: protocol version must be 1, found 2"),
    (struct.pack(">I", MAX_FRAME + 1), None, "bad_frame",
     f"header: frame length {MAX_FRAME + 1} exceeds the limit of {MAX_FRAME} bytes"),
    (struct.pack(">I", 0), None, "bad_frame", "header: frame length 0; expected 1 or more"),
])
async def test_bad_frames_get_one_error_and_never_reach_the_handler(
        tmp_path: Path, nursery: trio.Nursery, data: bytes, rid: int | None, code: str,
        message: str) -> None:
    served, _ = await start(nursery, tmp_path / "s" / "t.sock")
    client = await connect(tmp_path / "s" / "t.sock")
    if data.startswith(b"{") or data == b"not json":
        await client.send(data)
    else:  # a bare header: refused before any body is sent
        await client.stream.send_all(data)
    frames = await client.all()
    assert len(frames) == 1, frames
    error = frames[0]["error"]
    assert frames[0]["id"] == rid and error["code"] == code
    assert error["message"].startswith(message), error
    assert error["runbook"] == "docs/runbook.md#bad-frame"
    assert served.seen == []
    again = await connect(tmp_path / "s" / "t.sock")  # the shell goes on serving
    await again.send(STATUS)
    assert await again.all() == [{"id": 3, "ok": {}}]


async def test_a_bad_version_in_the_sockets_own_words(tmp_path: Path,
                                                      nursery: trio.Nursery) -> None:
    await start(nursery, tmp_path / "s" / "t.sock",
                wording=attrs_evolve(WORDING, bad_version="v must be 1"))
    client = await connect(tmp_path / "s" / "t.sock")
    await client.send(b'{"v":7,"id":2,"status":{}}')
    [frame] = await client.all()
    assert frame == {"id": 2, "error": {"code": "bad_version", "message": "v must be 1",
                                        "runbook": "docs/runbook.md#bad-frame"}}


def attrs_evolve(wording: Wording, **changes: Any) -> Wording:
    import attrs

    return attrs.evolve(wording, **changes)


async def test_request_frame_deadline(tmp_path: Path, nursery: trio.Nursery,
                                      autojump_clock: trio.testing.MockClock) -> None:
    served, _ = await start(nursery, tmp_path / "s" / "t.sock")
    client = await connect(tmp_path / "s" / "t.sock")
    await client.stream.send_all(b"\x00\x00")  # half a header: still not a frame
    before = trio.current_time()
    [frame] = await client.all()
    assert trio.current_time() - before == pytest.approx(REQUEST_FRAME_SECONDS, abs=0.01)
    assert frame == {"id": None, "error": {"code": "bad_frame",
                                           "message": "nothing within 10 s",
                                           "runbook": "docs/runbook.md#bad-frame"}}
    assert served.seen == []


async def test_a_silent_peer_closed_unanswered_when_the_socket_says_so(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    await start(nursery, tmp_path / "s" / "t.sock",
                wording=attrs_evolve(WORDING, no_frame=None))
    client = await connect(tmp_path / "s" / "t.sock")
    before = trio.current_time()
    assert await client.all() == []
    assert trio.current_time() - before == pytest.approx(REQUEST_FRAME_SECONDS, abs=0.01)


async def test_a_request_just_inside_the_deadline_is_served(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    await start(nursery, tmp_path / "s" / "t.sock")
    client = await connect(tmp_path / "s" / "t.sock")
    await trio.sleep(REQUEST_FRAME_SECONDS - 0.5)
    await client.send(STATUS)
    assert await client.all() == [{"id": 3, "ok": {}}]


async def test_a_handler_that_raises_stays_in_its_connection(
        tmp_path: Path, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture) -> None:
    def failing(served: Served) -> Callable[..., Awaitable[None]]:
        async def handle(stream: trio.SocketStream, peer: PeerCred,
                         request: AdminRequest) -> None:
            if request.id == 13:
                raise RuntimeError("a bug in the handler")
            await served.answer_ok(stream, peer, request)
        return handle

    await start(nursery, tmp_path / "s" / "t.sock", handle=failing)
    caplog.set_level(logging.ERROR, logger="boxmaker.sockets")
    client = await connect(tmp_path / "s" / "t.sock")
    await client.send({"v": 1, "id": 13, "status": {}})
    assert await client.all() == []  # closed, unanswered
    assert any("a connection failed" in r.getMessage() and r.exc_info is not None
               and "a bug in the handler" in str(r.exc_info[1]) for r in caplog.records)
    again = await connect(tmp_path / "s" / "t.sock")
    await again.send(STATUS)
    assert await again.all() == [{"id": 3, "ok": {}}]


async def test_a_peer_that_resets_mid_frame_is_contained(tmp_path: Path,
                                                         nursery: trio.Nursery) -> None:
    served, _ = await start(nursery, tmp_path / "s" / "t.sock")
    client = await connect(tmp_path / "s" / "t.sock")
    await client.stream.send_all(struct.pack(">I", 100) + b"{")
    await client.stream.aclose()  # gone inside a frame
    again = await connect(tmp_path / "s" / "t.sock")
    await again.send(STATUS)
    assert await again.all() == [{"id": 3, "ok": {}}]
    assert len(served.seen) == 1


async def test_forbidden_for_a_uid_not_allowed(tmp_path: Path, nursery: trio.Nursery,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="boxmaker.sockets")
    served, _ = await start(nursery, tmp_path / "s" / "t.sock", allowed=frozenset({UID + 4242}))
    client = await connect(tmp_path / "s" / "t.sock")
    await client.send(STATUS)
    assert await client.all() == [{"id": None, "error": {
        "code": "forbidden", "message": f"uid {UID} may not use test.sock",
        "runbook": "docs/runbook.md#forbidden-peer"}}]
    assert served.seen == []
    assert any(f"uid {UID}" in r.getMessage() and "forbidden-peer" in r.getMessage()
               for r in caplog.records)


OTHER_CLIENT = r"""
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])
body = json.dumps({"v": 1, "id": 1, "status": {}}).encode()
s.sendall(struct.pack(">I", len(body)) + body)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
frames = []
while data:
    (n,) = struct.unpack(">I", data[:4])
    frames.append(json.loads(data[4:4 + n]))
    data = data[4 + n:]
print(json.dumps(frames))
"""
SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(SETPRIV is None or UID != 0, reason="needs root and setpriv(1)")
@pytest.mark.parametrize("gid", [OTHER_UID, 0])
async def test_a_real_other_uid_is_refused(nursery: trio.Nursery, gid: int) -> None:
    """Another uid, through a socket file it may open (0666): SO_PEERCRED is the gate,
    and being in the allowed uid's group (gid 0) does not help."""
    assert SETPRIV is not None
    root = Path(tempfile.mkdtemp(prefix="bx-h12-shell-"))
    try:
        os.chmod(root, 0o711)
        path = root / "run" / "t.sock"
        served, _ = await start(nursery, path, allowed=frozenset({0}), open_socket=True)

        async def as_uid(uid: int, gid: int) -> list[dict[str, Any]]:
            done = await trio.run_process(
                [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                 sys.executable if uid == 0 else "/usr/bin/python3", "-c", OTHER_CLIENT,
                 str(path)], capture_stdout=True, capture_stderr=True, check=False)
            assert done.returncode == 0, done.stderr
            frames: list[dict[str, Any]] = json.loads(done.stdout)
            return frames

        with trio.fail_after(60):
            refused = await as_uid(OTHER_UID, gid)
            assert refused == [{"id": None, "error": {
                "code": "forbidden", "message": f"uid {OTHER_UID} may not use test.sock",
                "runbook": "docs/runbook.md#forbidden-peer"}}]
            assert served.seen == []
            assert await as_uid(0, 0) == [{"id": 1, "ok": {}}]
        assert [peer.uid for peer, _ in served.seen] == [0]
    finally:
        shutil.rmtree(root)


async def test_accepting_pauses_on_emfile_and_goes_on(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock,
        caplog: pytest.LogCaptureFixture) -> None:
    """The process runs out of descriptors for real (RLIMIT_NOFILE lowered to the
    descriptors it holds): accept() fails with EMFILE, the listener pauses, and once
    descriptors are free again the waiting peer is served."""
    caplog.set_level(logging.WARNING, logger="boxmaker.sockets")
    served, _ = await start(nursery, tmp_path / "s" / "t.sock")
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.dup(0)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        raw.connect(os.fspath(tmp_path / "s" / "t.sock"))  # in the kernel's backlog
        client = Client(trio.SocketStream(trio.socket.from_stdlib_socket(raw)))
        await client.send(STATUS)
        await trio.sleep(5)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    paused = [r.getMessage() for r in caplog.records if "listener paused" in r.getMessage()]
    assert paused and all("Too many open files" in m for m in paused), paused
    assert served.seen == []
    assert len(paused) >= 5  # backing off, 0.01 s doubling up to 1 s, within 5 s
    with trio.fail_after(30):
        assert await client.all() == [{"id": 3, "ok": {}}]


async def test_max_connections_holds_the_next_peer_in_the_backlog(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    release = trio.Event()

    def slow(served: Served) -> Callable[..., Awaitable[None]]:
        async def handle(stream: trio.SocketStream, peer: PeerCred,
                         request: AdminRequest) -> None:
            served.seen.append((peer, request))
            await release.wait()
            await send_frame(stream, encode_admin_answer(request.id, Ok()))
        return handle

    served, _ = await start(nursery, tmp_path / "s" / "t.sock", handle=slow, max_connections=1)
    first = await connect(tmp_path / "s" / "t.sock")
    await first.send(STATUS)
    second = await connect(tmp_path / "s" / "t.sock")
    await second.send({"v": 1, "id": 4, "status": {}})
    await trio.testing.wait_all_tasks_blocked()
    assert [r.id for _, r in served.seen] == [3]  # the second is not even read
    release.set()
    assert await first.all() == [{"id": 3, "ok": {}}]
    assert await second.all() == [{"id": 4, "ok": {}}]


async def test_a_lost_listener_without_on_lost_raises(tmp_path: Path) -> None:
    lost: list[BaseException] = []
    try:
        async with trio.open_nursery() as nursery:
            _, listener = await start(nursery, tmp_path / "s" / "t.sock")
            listener.close()
    except* ListenerLost as group:
        lost.extend(group.exceptions)
    assert len(lost) == 1


async def test_a_lost_listener_with_on_lost_lets_connections_finish(tmp_path: Path) -> None:
    lost: list[ListenerLost] = []
    release = trio.Event()

    def slow(served: Served) -> Callable[..., Awaitable[None]]:
        async def handle(stream: trio.SocketStream, peer: PeerCred,
                         request: AdminRequest) -> None:
            await release.wait()
            await served.answer_ok(stream, peer, request)
        return handle

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            _, listener = await start(nursery, tmp_path / "s" / "t.sock", handle=slow,
                                      on_lost=lost.append)
            client = await connect(tmp_path / "s" / "t.sock")
            await client.send(STATUS)
            await trio.testing.wait_all_tasks_blocked()
            listener.close()
            await trio.testing.wait_all_tasks_blocked()
            assert len(lost) == 1
            release.set()
            assert await client.all() == [{"id": 3, "ok": {}}]
        # serve returned on its own: its connection had ended


async def test_stop_reading_closes_idle_peers_and_stop_accepting_returns(
        tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            served, _ = await start(nursery, tmp_path / "s" / "t.sock")
            idle = await connect(tmp_path / "s" / "t.sock")
            await trio.testing.wait_all_tasks_blocked()
            served.shell.stop_accepting()
            served.shell.stop_reading()
            assert await idle.all() == []  # closed without an answer (not bad_frame)
    assert served.seen == []


async def test_a_peer_accepted_before_the_stop_is_still_answered(tmp_path: Path) -> None:
    """A client sends its frame at once after connecting; one accepted just before the
    stop (a restart under load) gets STOP_GRACE_SECONDS for it and is answered."""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            served, _ = await start(nursery, tmp_path / "s" / "t.sock")
            late = await connect(tmp_path / "s" / "t.sock")
            await trio.testing.wait_all_tasks_blocked()
            served.shell.stop_accepting()
            served.shell.stop_reading()
            await late.send(STATUS)
            assert await late.all() == [{"id": 3, "ok": {}}]
    assert len(served.seen) == 1


async def test_linger_close_drains_then_returns(autojump_clock: trio.testing.MockClock) -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.send_all(b"x" * 10_000)
    before = trio.current_time()
    await linger_close(ours)  # reads what is there, then gives up after its second
    assert trio.current_time() - before == pytest.approx(1.0)
    await theirs.aclose()
    ours2, theirs2 = trio.testing.memory_stream_pair()
    await theirs2.aclose()
    before = trio.current_time()
    await linger_close(ours2)  # end of input: returns at once
    assert trio.current_time() == before
