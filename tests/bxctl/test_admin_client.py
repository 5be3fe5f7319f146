"""bxctl's admin.sock client (boxmaker/bxctl/_admin_client.py) against a real
Unix socket served from a thread: it checks the server's uid before sending,
and every way brokerd can fail to answer is a DaemonUnreachable that says
whether the request went out."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from boxmaker.bxctl._admin_client import EXIT_UNREACHABLE, DaemonUnreachable, request
from boxmaker.proto._convert import U64
from boxmaker.proto._framing import FrameDecoder, encode_frame
from boxmaker.proto.wire._wire import Ok
from boxmaker.proto.wire._wire_admin import (
    ApproveRequest,
    StatusRequest,
    decode_admin_request,
    encode_admin_answer,
)

Reply = Callable[[socket.socket, bytes], None]


@contextmanager
def server(path: Path, reply: Reply) -> Iterator[list[bytes]]:
    """Serve one connection: read one request frame, let `reply` answer it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.fsencode(path))
    listener.listen(1)
    received: list[bytes] = []

    def run() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(20)
            decoder = FrameDecoder()
            body = None
            while body is None:
                data = conn.recv(65536)
                if not data:
                    return
                decoder.feed(data)
                body = decoder.next_frame()
            received.append(body)
            reply(conn, body)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        listener.close()
        thread.join(timeout=20)


def ok_reply(conn: socket.socket, body: bytes) -> None:
    conn.sendall(encode_frame(encode_admin_answer(decode_admin_request(body).id, Ok())))


def test_a_request_and_its_answer(tmp_path: Path) -> None:
    sock = tmp_path / "admin.sock"
    with server(sock, ok_reply) as received:
        answer = request(sock, ApproveRequest(approval_id=U64(7)), brokerd_uid=os.getuid(),
                         request_id=42)
    assert answer == Ok()
    sent = decode_admin_request(received[0])
    assert sent.id == 42 and sent.body == ApproveRequest(approval_id=U64(7))


def test_a_socket_served_by_another_uid_gets_nothing(tmp_path: Path) -> None:
    sock = tmp_path / "admin.sock"
    with server(sock, ok_reply) as received, pytest.raises(DaemonUnreachable) as caught:
        request(sock, StatusRequest(), brokerd_uid=os.getuid() + 1)
    assert not caught.value.sent and received == []
    assert f"served by uid {os.getuid()}" in caught.value.message
    assert "nothing was sent" in caught.value.message
    assert "docs/runbook.md#daemon-unreachable" in caught.value.format_message()
    assert caught.value.exit_code == EXIT_UNREACHABLE


def test_no_socket_and_no_listener(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnreachable, match="no such socket") as caught:
        request(tmp_path / "absent.sock", StatusRequest(), brokerd_uid=os.getuid())
    assert not caught.value.sent
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.fsencode(stale))
    s.close()  # the file is there, nobody listens
    with pytest.raises(DaemonUnreachable, match="connection refused"):
        request(stale, StatusRequest(), brokerd_uid=os.getuid())


@pytest.mark.parametrize(("reply", "why"), [
    (lambda conn, body: None, "closed the connection without an answer"),
    (lambda conn, body: conn.sendall(b"\xff\xff\xff\xff"), "does not decode"),
    (lambda conn, body: conn.sendall(encode_frame(b"not json")), "does not decode"),
    (lambda conn, body: conn.sendall(encode_frame(encode_admin_answer(999, Ok()))),
     "answered another request"),
])
def test_after_sending_it_says_brokerd_may_have_acted(tmp_path: Path, reply: Reply,
                                                      why: str) -> None:
    sock = tmp_path / "admin.sock"
    with server(sock, reply) as received, pytest.raises(DaemonUnreachable) as caught:
        request(sock, StatusRequest(), brokerd_uid=os.getuid(), request_id=1)
    assert received, "the request went out"
    assert caught.value.sent and why in caught.value.message
    assert "may or may not have acted" in caught.value.message
