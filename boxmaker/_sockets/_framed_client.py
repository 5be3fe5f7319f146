"""The client side of one framed request (02-wire): connect, check the server, one answer.

bxctl and the approval page ask brokerd's admin.sock the same way, one
request per connection: connect; check with SO_PEERCRED that the socket is
served by the expected uid (`served_by`) *before* sending anything, so that a
socket planted by someone else cannot show a fake approval; send the request
frame; read one answer frame within what is left of the time limit.

Blocking (a thread for trio callers).  Every failure is an `ExchangeFailed`
that says at which step it happened and whether the request had gone out;
each caller words it its own way.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Literal

from .._errors import UnavailableError
from ..proto._errors import DecodeError
from ..proto._framing import FrameDecoder, encode_frame
from ._unix import peer_credentials, served_by

FailedAt = Literal["connect", "wrong_server", "send", "undecodable", "timeout", "receive",
                   "closed"]
_RECEIVE_CHUNK = 65536


class ExchangeFailed(UnavailableError):
    """One request and its answer did not happen; `step` says where it stopped.

    `sent`: the request had gone out (the server may have acted).  `error`:
    the OSError or DecodeError behind it, if any; `server_uid` for
    `wrong_server`.
    """

    def __init__(self, step: FailedAt, *, sent: bool, error: Exception | None = None,
                 server_uid: int | None = None) -> None:
        super().__init__(step if error is None else f"{step}: {error}")
        self.step: FailedAt = step
        self.sent = sent
        self.error = error
        self.server_uid = server_uid


def exchange(path: Path, request: bytes, *, server_uid: int, timeout: float) -> bytes:
    """Send the frame body `request` to the socket at `path`; the answer frame's body."""
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(os.fsencode(path))
        except OSError as exc:
            raise ExchangeFailed("connect", sent=False, error=exc) from None
        server = peer_credentials(sock)
        if not served_by(server, server_uid):
            raise ExchangeFailed("wrong_server", sent=False, server_uid=server.uid)
        try:
            sock.sendall(encode_frame(request))
        except OSError as exc:
            raise ExchangeFailed("send", sent=True, error=exc) from None
        return _receive_one(sock, deadline)
    finally:
        sock.close()


def _receive_one(sock: socket.socket, deadline: float) -> bytes:
    decoder = FrameDecoder()
    while True:
        try:
            body = decoder.next_frame()
        except DecodeError as exc:
            raise ExchangeFailed("undecodable", sent=True, error=exc) from None
        if body is not None:
            return body
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ExchangeFailed("timeout", sent=True)
        sock.settimeout(remaining)
        try:
            data = sock.recv(_RECEIVE_CHUNK)
        except TimeoutError:
            raise ExchangeFailed("timeout", sent=True) from None
        except OSError as exc:
            raise ExchangeFailed("receive", sent=True, error=exc) from None
        if not data:
            raise ExchangeFailed("closed", sent=True)
        try:
            decoder.feed(data)
        except DecodeError as exc:
            raise ExchangeFailed("undecodable", sent=True, error=exc) from None
