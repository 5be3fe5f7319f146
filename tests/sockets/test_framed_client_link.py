"""The blocking link of boxmaker/_sockets/_framed_client.py (`open_link`, `FramedLink`), against
real Unix sockets served by a thread: every frame of an answer in order, each wait bounded
by its deadline, a peer that never answers, a header over the limit refused before its
body, a cut inside a frame, the server checked before anything is sent."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from boxmaker._sockets._framed_client import ExchangeFailed, open_link
from boxmaker.proto._framing import MAX_FRAME

UID = os.getuid()
REQUEST = json.dumps({"v": 1, "id": 7, "say": {"conversation": "c", "text": "hi"}}).encode()


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


class Peer:
    """A listening socket; with `script`, a thread accepts one connection, reads the request
    frame and runs `script(conn)`; without, nobody ever accepts (a peer that never answers)."""

    def __init__(self, path: Path, script: Callable[[socket.socket], None] | None) -> None:
        self.path = path
        self.received = b""
        self.done = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.thread: threading.Thread | None = None
        if script is not None:
            self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
            self.thread.start()

    def _serve(self, script: Callable[[socket.socket], None]) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(10)
            try:
                header = conn.recv(4)
                if len(header) < 4:  # the client closed without sending
                    return
                (size,) = struct.unpack(">I", header)
                while len(self.received) < size:
                    chunk = conn.recv(size - len(self.received))
                    if not chunk:
                        break
                    self.received += chunk
                script(conn)
            except OSError:
                pass
            self.done.wait(10)  # the connection stays open until the test is done

    def close(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(10)
        self.sock.close()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Callable[[Callable[[socket.socket], None] | None], Peer]]:
    peers: list[Peer] = []

    def start(script: Callable[[socket.socket], None] | None) -> Peer:
        made = Peer(tmp_path / f"p{len(peers)}.sock", script)
        peers.append(made)
        return made

    yield start
    for made in peers:
        made.close()


def _closing(bodies: list[bytes]) -> Callable[[socket.socket], None]:
    def script(conn: socket.socket) -> None:
        for body in bodies:
            conn.sendall(frame(body))
        conn.shutdown(socket.SHUT_WR)

    return script


def test_every_frame_in_order_then_the_close(peer: Callable[..., Peer]) -> None:
    bodies = [b'{"id":7,"event":{"text":{"delta":"a"}}}', b"x" * 70000, b'{"id":7,"done":{}}']
    server = peer(_closing(bodies))
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10) as link:
        got = [link.receive(time.monotonic() + 10) for _ in bodies]
        assert link.receive(time.monotonic() + 10) is None  # closed between frames
        assert link.receive() is None
    assert got == bodies
    assert server.received == REQUEST


def test_no_deadline_waits_for_a_frame_that_comes(peer: Callable[..., Peer]) -> None:
    go = threading.Event()

    def late(conn: socket.socket) -> None:
        go.wait(10)
        conn.sendall(frame(b'{"id":7,"done":{}}'))

    server = peer(late)
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10) as link:
        go.set()
        assert link.receive(None) == b'{"id":7,"done":{}}'


def test_a_peer_that_never_answers_meets_the_deadline(peer: Callable[..., Peer]) -> None:
    server = peer(None)  # listening, never accepting: the connection and the send succeed
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10) as link:
        for deadline in (time.monotonic() + 0.05, time.monotonic() - 1):  # the 2nd: gone
            with pytest.raises(ExchangeFailed) as failed:
                link.receive(deadline)
            assert failed.value.step == "timeout" and failed.value.sent


def test_a_frame_that_stops_halfway_meets_the_deadline(peer: Callable[..., Peer]) -> None:
    server = peer(lambda conn: conn.sendall(frame(b'{"id":7,"done":{}}')[:9]))
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10) as link, \
            pytest.raises(ExchangeFailed) as failed:
            link.receive(time.monotonic() + 0.05)
    assert failed.value.step == "timeout"


@pytest.mark.parametrize("limit", [MAX_FRAME, 64])
def test_a_header_over_the_limit_is_refused_before_its_body(peer: Callable[..., Peer],
                                                             limit: int) -> None:
    """The header alone is enough: the link does not wait for a body it will not take
    (the peer sends no body and keeps the connection open; the deadline is far)."""
    server = peer(lambda conn: conn.sendall(struct.pack(">I", limit + 1)))
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10,
                   max_frame=limit) as link, \
            pytest.raises(ExchangeFailed) as failed:
            link.receive(time.monotonic() + 30)
    assert failed.value.step == "undecodable" and failed.value.sent
    assert f"exceeds the limit of {limit} bytes" in str(failed.value.error)


def test_a_frame_at_the_limit_is_taken(peer: Callable[..., Peer]) -> None:
    server = peer(_closing([b"y" * 64]))
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10,
                   max_frame=64) as link:
        assert link.receive(time.monotonic() + 10) == b"y" * 64


def test_a_zero_length_header_is_refused(peer: Callable[..., Peer]) -> None:
    server = peer(lambda conn: conn.sendall(struct.pack(">I", 0)))
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10) as link, \
            pytest.raises(ExchangeFailed) as failed:
            link.receive(time.monotonic() + 30)
    assert failed.value.step == "undecodable"


def test_a_close_inside_a_frame_is_not_a_clean_end(peer: Callable[..., Peer]) -> None:
    def cut(conn: socket.socket) -> None:
        conn.sendall(frame(b'{"id":7,"done":{}}')[:-3])
        conn.shutdown(socket.SHUT_WR)

    server = peer(cut)
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10) as link, \
            pytest.raises(ExchangeFailed) as failed:
            link.receive(time.monotonic() + 10)
    assert failed.value.step == "closed" and failed.value.sent


def test_a_server_of_another_uid_gets_nothing(peer: Callable[..., Peer]) -> None:
    server = peer(lambda conn: None)
    with pytest.raises(ExchangeFailed) as failed:
        open_link(server.path, REQUEST, server_uid=UID + 4242, connect_timeout=10)
    assert failed.value.step == "wrong_server" and failed.value.server_uid == UID
    assert not failed.value.sent
    server.close()
    assert server.received == b""


def test_no_such_socket(tmp_path: Path) -> None:
    with pytest.raises(ExchangeFailed) as failed:
        open_link(tmp_path / "none.sock", REQUEST, server_uid=UID, connect_timeout=10)
    assert failed.value.step == "connect" and not failed.value.sent
    assert isinstance(failed.value.error, FileNotFoundError)


def test_leaving_the_block_closes_the_connection(peer: Callable[..., Peer]) -> None:
    seen: list[bytes] = []
    closed = threading.Event()

    def watch(conn: socket.socket) -> None:
        seen.append(conn.recv(1))  # b"" once the client has closed
        closed.set()

    server = peer(watch)
    with open_link(server.path, REQUEST, server_uid=UID, connect_timeout=10):
        pass
    assert closed.wait(10) and seen == [b""]
    assert server.received == REQUEST
