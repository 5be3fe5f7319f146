"""The client side of one framed request (boxmaker/_sockets/_framed_client.py), against real
Unix sockets: the answer, the server check before anything is sent (a socket
planted by a real other uid, by setpriv), and where each failure stops."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from boxmaker._sockets._framed_client import ExchangeFailed, exchange

UID = os.getuid()
REQUEST = json.dumps({"v": 1, "id": 1, "status": {}}).encode()


class Server:
    """A listening socket in a thread; `reply(conn, received)` answers one connection."""

    def __init__(self, path: Path, reply: Callable[[socket.socket, bytes], None]) -> None:
        self.path = path
        self.received = b""
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.reply = reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(10)
            try:
                header = conn.recv(4)
                if len(header) == 4:
                    (size,) = struct.unpack(">I", header)
                    while len(self.received) < size:
                        chunk = conn.recv(size - len(self.received))
                        if not chunk:
                            break
                        self.received += chunk
            except OSError:
                return
            self.reply(conn, self.received)

    def close(self) -> None:
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Callable[[socket.socket, bytes], None]], Server]]:
    servers: list[Server] = []

    def start(reply: Callable[[socket.socket, bytes], None]) -> Server:
        server = Server(tmp_path / f"s{len(servers)}.sock", reply)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def test_one_answer(serve: Callable[..., Server]) -> None:
    server = serve(lambda conn, got: conn.sendall(frame(b'{"id":1,"ok":{}}')))
    assert exchange(server.path, REQUEST, server_uid=UID, timeout=10) == b'{"id":1,"ok":{}}'
    assert server.received == REQUEST


def test_no_such_socket(tmp_path: Path) -> None:
    with pytest.raises(ExchangeFailed) as failed:
        exchange(tmp_path / "none.sock", REQUEST, server_uid=UID, timeout=10)
    assert failed.value.step == "connect" and not failed.value.sent
    assert isinstance(failed.value.error, FileNotFoundError)


def test_a_server_of_another_uid_gets_nothing(serve: Callable[..., Server]) -> None:
    server = serve(lambda conn, got: None)
    with pytest.raises(ExchangeFailed) as failed:
        exchange(server.path, REQUEST, server_uid=UID + 4242, timeout=10)
    assert failed.value.step == "wrong_server" and failed.value.server_uid == UID
    assert not failed.value.sent
    server.close()
    assert server.received == b""  # nothing was sent to it


@pytest.mark.parametrize(("reply", "step"), [
    (lambda conn, got: None, "closed"),
    (lambda conn, got: conn.sendall(struct.pack(">I", 0)), "undecodable"),
    (lambda conn, got: conn.sendall(struct.pack(">I", 9 * 1024 * 1024)), "undecodable"),
    (lambda conn, got: conn.sendall(frame(b'{"id":1}')[:6]), "closed"),
])
def test_where_a_failure_after_sending_stops(serve: Callable[..., Server],
                                             reply: Callable[[socket.socket, bytes], None],
                                             step: str) -> None:
    server = serve(reply)
    with pytest.raises(ExchangeFailed) as failed:
        exchange(server.path, REQUEST, server_uid=UID, timeout=10)
    assert failed.value.step == step and failed.value.sent


def test_no_answer_in_time(serve: Callable[..., Server]) -> None:
    answered = threading.Event()
    server = serve(lambda conn, got: answered.wait(10))
    with pytest.raises(ExchangeFailed) as failed:
        exchange(server.path, REQUEST, server_uid=UID, timeout=0.05)
    answered.set()
    assert failed.value.step == "timeout" and failed.value.sent


PLANTED = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()
print("ready", flush=True)
conn, _ = s.accept(); conn.settimeout(10)
got = b""
try:
    while chunk := conn.recv(65536):
        got += chunk
except OSError:
    pass
print(len(got), flush=True)
"""
SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(SETPRIV is None or UID != 0, reason="needs root and setpriv(1)")
def test_a_socket_planted_by_another_uid_is_refused_before_sending() -> None:
    assert SETPRIV is not None
    root = Path(tempfile.mkdtemp(prefix="bx-h12-shell-"))
    try:
        os.chmod(root, 0o777)
        path = root / "admin.sock"
        proc = subprocess.Popen(
            [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
             "-c", PLANTED, str(path)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            with pytest.raises(ExchangeFailed) as failed:
                exchange(path, REQUEST, server_uid=UID, timeout=10)
            assert failed.value.step == "wrong_server" and failed.value.server_uid == 65534
            out, _ = proc.communicate(timeout=30)
            assert out.strip() == "0"  # the planted server read nothing
        finally:
            proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(root)
