"""bxctl's admin.sock client (boxmaker/bxctl/_admin_client.py) against a real
Unix socket served from a thread: it checks the server's uid before sending,
and every way brokerd can fail to answer is a DaemonUnreachable that says
whether the request went out."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from boxmaker.bxctl._admin_client import EXIT_UNREACHABLE, DaemonUnreachable, request
from boxmaker.proto._convert import U64
from boxmaker.proto.wire._wire import Ok
from boxmaker.proto.wire._wire_admin import (
    ApproveRequest,
    StatusRequest,
    decode_admin_request,
    encode_admin_answer,
)
from tests.fakes.framed_server import Answer, Body, FramedServer, Raw


def ok_reply(request: dict[str, Any]) -> list[Body]:
    return [encode_admin_answer(request["id"], Ok())]


def test_a_request_and_its_answer(tmp_path: Path) -> None:
    sock = tmp_path / "admin.sock"
    with FramedServer(sock, ok_reply) as fake:
        answer = request(sock, ApproveRequest(approval_id=U64(7)), brokerd_uid=os.getuid(),
                         request_id=42)
    assert answer == Ok()
    sent = decode_admin_request(fake.received[0])
    assert sent.id == 42 and sent.body == ApproveRequest(approval_id=U64(7))


def test_a_socket_served_by_another_uid_gets_nothing(tmp_path: Path) -> None:
    sock = tmp_path / "admin.sock"
    with FramedServer(sock, ok_reply) as fake, pytest.raises(DaemonUnreachable) as caught:
        request(sock, StatusRequest(), brokerd_uid=os.getuid() + 1)
    assert not caught.value.sent and fake.received == []
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
    (lambda request: [], "closed the connection without an answer"),
    (lambda request: [Raw(b"\xff\xff\xff\xff")], "does not decode"),
    (lambda request: [b"not json"], "does not decode"),
    (lambda request: [encode_admin_answer(999, Ok())], "answered another request"),
])
def test_after_sending_it_says_brokerd_may_have_acted(tmp_path: Path, reply: Answer,
                                                      why: str) -> None:
    sock = tmp_path / "admin.sock"
    with FramedServer(sock, reply) as fake, pytest.raises(DaemonUnreachable) as caught:
        request(sock, StatusRequest(), brokerd_uid=os.getuid(), request_id=1)
    assert fake.received, "the request went out"
    assert caught.value.sent and why in caught.value.message
    assert "may or may not have acted" in caught.value.message
