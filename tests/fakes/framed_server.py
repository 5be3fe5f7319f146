"""A framed Unix socket served by a thread of this process: a fake loopd or brokerd.

The stand-in for loop.sock or admin.sock in the bxctl tests.  It is a real
socket, served by our own uid (so the client's uid check passes), speaking
02-wire's framing (a 4-byte big-endian length, then the body).  Each
connection is served alike: one request frame is read and kept (`received`,
the bytes; `requests`, the JSON), then what the server is told to answer is
sent, in order, and the connection is closed.  A connection that closes
before a whole request frame is kept as nothing.

What it answers is one of:

- a callable, given the request (its JSON) and giving the bodies to send; a
  generator may wait (on a `threading.Event` of the test, or on `closing`)
  between its bodies, and an empty answer is a connection closed unanswered;
- a scripted list: the n-th connection gets the n-th item (one body) and any
  connection after the last gets nothing.

A body is a dict (sent as its JSON), bytes (framed) or `Raw` bytes (sent as
they are: a torn frame, a bad header).  With `linger`, the connection is kept
open after the answer until the client closes it (`hung_up` is then set).
It is a context manager too (closed on leaving).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.fakes.brokerd import frame


class Raw(bytes):
    """Bytes the server sends as they are, with no frame header of their own."""


Body = dict[str, Any] | bytes
Answer = Callable[[dict[str, Any]], Iterable[Body]]


def receive_exactly(conn: socket.socket, size: int) -> bytes:
    data = conn.recv(size, socket.MSG_WAITALL)
    if len(data) < size:
        raise ConnectionError("closed inside a frame")
    return data


class FramedServer:
    """`path` served by a thread until `close()`; see the module's docstring."""

    def __init__(self, path: Path, answer: Answer | Sequence[Body], *,
                 linger: bool = False) -> None:
        self.path = path
        self.answer: Answer = answer if callable(answer) else _scripted(answer)
        self.linger = linger
        self.received: list[bytes] = []
        self.closing = threading.Event()  # set by close(), first
        self.hung_up = threading.Event()  # with linger: the client closed after the answer
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in self.received]

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(30)
                try:
                    (size,) = struct.unpack(">I", receive_exactly(conn, 4))
                    body = receive_exactly(conn, size)
                    self.received.append(body)
                    for out in self.answer(json.loads(body)):
                        conn.sendall(out if isinstance(out, Raw) else frame(out))
                    while self.linger and conn.recv(4096):
                        pass
                    if self.linger:
                        self.hung_up.set()
                except OSError:  # ConnectionError too: the client went away
                    pass

    def __enter__(self) -> FramedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(10)


def _scripted(bodies: Sequence[Body]) -> Answer:
    """The n-th connection's answer: the n-th body; after the last, none."""
    left = iter(bodies)

    def answer(request: dict[str, Any]) -> list[Body]:
        body = next(left, None)
        return [] if body is None else [body]

    return answer
