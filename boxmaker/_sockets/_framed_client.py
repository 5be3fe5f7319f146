"""The client side of a framed request (02-wire): connect, check the server, read frames.

bxctl and the approval page ask brokerd's admin.sock the same way, one
request per connection: connect; check with SO_PEERCRED that the socket is
served by the expected uid (`served_by`) *before* sending anything, so that a
socket planted by someone else cannot show a fake approval; send the request
frame; read one answer frame within what is left of the time limit
(`exchange`).  `bxctl chat --say` asks loop.sock the same way and then reads
every frame of the turn (`open_link`, `FramedLink.receive`), each wait bounded
by a deadline when the caller gives one; every frame is bounded by the
framing's limit (8 MiB; a header over it is refused before its body is read).

Blocking, with no trio (a thread for trio callers): a short-lived bxctl does
not pay for trio's import.  Every failure is an `ExchangeFailed` that says at
which step it happened and whether the request had gone out; each caller
words it its own way.  The framing itself is the sans-IO `FrameDecoder`.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Literal

from .._errors import UnavailableError
from ..proto._errors import DecodeError
from ..proto._framing import MAX_FRAME, FrameDecoder, encode_frame
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


class FramedLink:
    """One connection that carries one request and the frames that answer it."""

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME) -> None:
        self._sock = sock
        self._decoder = FrameDecoder(max_frame)

    def __enter__(self) -> FramedLink:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def receive(self, deadline: float | None = None) -> bytes | None:
        """The next frame's body; None when the server closed the connection between frames.

        `deadline` (a `time.monotonic()` time) bounds the wait; None waits as long as
        the server takes (a turn waiting for the owner; Ctrl-C still interrupts).
        ExchangeFailed (sent): "undecodable" for a header out of the framing's range,
        refused before its body is read; "timeout" at the deadline; "receive" for an
        OSError; "closed" when the server closed inside a frame.
        """
        decoder = self._decoder
        while True:
            try:
                body = decoder.next_frame()
            except DecodeError as exc:
                raise ExchangeFailed("undecodable", sent=True, error=exc) from None
            if body is not None:
                return body
            if deadline is None:
                self._sock.settimeout(None)
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ExchangeFailed("timeout", sent=True)
                self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(min(_RECEIVE_CHUNK, max(decoder.wanted, 4096)))
            except TimeoutError:
                raise ExchangeFailed("timeout", sent=True) from None
            except OSError as exc:
                raise ExchangeFailed("receive", sent=True, error=exc) from None
            if not data:
                if decoder.buffered:
                    raise ExchangeFailed("closed", sent=True)
                return None
            try:
                decoder.feed(data)
            except DecodeError as exc:
                raise ExchangeFailed("undecodable", sent=True, error=exc) from None


def open_link(path: Path, request: bytes, *, server_uid: int, connect_timeout: float,
              max_frame: int = MAX_FRAME) -> FramedLink:
    """Connect to `path` (within `connect_timeout`), check that `server_uid` serves it,
    send the frame body `request`; the link to read the answers from, to be used in a
    ``with`` block: leaving it closes the connection (to loopd: the turn is cancelled)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(connect_timeout)
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
    except BaseException:
        sock.close()
        raise
    return FramedLink(sock, max_frame)


def exchange(path: Path, request: bytes, *, server_uid: int, timeout: float) -> bytes:
    """Send the frame body `request` to the socket at `path`; the answer frame's body."""
    deadline = time.monotonic() + timeout
    with open_link(path, request, server_uid=server_uid, connect_timeout=timeout) as link:
        body = link.receive(deadline)
    if body is None:
        raise ExchangeFailed("closed", sent=True)
    return body
