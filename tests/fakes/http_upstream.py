"""A scriptable HTTP server for proxy tests: h11 reads the request, the test writes raw bytes.

    upstream = HttpUpstream(respond)
    port = await nursery.start(upstream.serve)              # TCP on 127.0.0.1:0
    port = await nursery.start(partial(upstream.serve, ssl_context=ctx))   # TLS

`respond(request, stream)` is an async function the test writes: it sends the
answer as raw bytes (`sse_head`, `chunk`, `json_answer` help) and may wait on
events the test controls.  The server records every `Received` request:
method, target, headers (names lower case), the body pieces as they came, and
two events: `first_body_data` (the first piece of the body arrived) and
`peer_closed` (the client's end closed: EOF or a broken connection, watched
from the moment the request head arrived).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import h11
import trio


@attrs.define
class Received:
    method: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]]
    body_parts: list[bytes] = attrs.field(factory=list)
    complete: bool = False
    first_body_data: trio.Event = attrs.field(factory=trio.Event)
    body_done: trio.Event = attrs.field(factory=trio.Event)
    peer_closed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def body(self) -> bytes:
        return b"".join(self.body_parts)

    def header_values(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.headers if key == name]


Respond = Callable[[Received, trio.abc.Stream], Awaitable[None]]


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


def sse_head(extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n" + extra
            + b"\r\n")


def data_event(value: Any) -> bytes:
    text = value if isinstance(value, str) else json.dumps(value)
    return b"data: " + text.encode() + b"\n\n"


def json_answer(status: int, value: Any, *, extra: bytes = b"") -> bytes:
    body = json.dumps(value).encode()
    return (b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            % (status, len(body)) + extra + b"\r\n" + body)


async def answer_ok(request: Received, stream: trio.abc.Stream) -> None:
    """Wait for the whole body, then answer 200 {"ok": true}."""
    await request.body_done.wait()
    await stream.send_all(json_answer(200, {"ok": True}))


class HttpUpstream:
    def __init__(self, respond: Respond = answer_ok) -> None:
        self.respond = respond
        self.requests: list[Received] = []
        self.connections = 0
        self.request_arrived = trio.Event()

    async def serve(self, *, ssl_context: ssl.SSLContext | None = None,
                    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with listeners[0], trio.open_nursery() as nursery:
            task_status.started(port)
            while True:
                conn = await listeners[0].accept()
                self.connections += 1
                stream: trio.abc.Stream = conn
                if ssl_context is not None:
                    stream = trio.SSLStream(conn, ssl_context, server_side=True)
                nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.abc.Stream) -> None:
        try:
            async with trio.open_nursery() as nursery:
                h = h11.Connection(h11.SERVER)
                request = await self._read_head(stream, h)
                if request is None:
                    return
                nursery.start_soon(self._read_rest, stream, h, request)
                await self.respond(request, stream)
                nursery.cancel_scope.cancel()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _receive(self, stream: trio.abc.Stream) -> bytes:
        try:
            return bytes(await stream.receive_some(65536))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def _read_head(self, stream: trio.abc.Stream, h: h11.Connection) -> Received | None:
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                data = await self._receive(stream)
                if not data:
                    return None
                h.receive_data(data)
                continue
            assert isinstance(event, h11.Request), event
            request = Received(method=bytes(event.method), target=bytes(event.target),
                               headers=[(bytes(k), bytes(v)) for k, v in event.headers])
            self.requests.append(request)
            self.request_arrived.set()
            return request

    async def _read_rest(self, stream: trio.abc.Stream, h: h11.Connection,
                         request: Received) -> None:
        """The body as it comes, then watch for the client's end closing."""
        while not request.complete:
            event = h.next_event()
            if event is h11.NEED_DATA:
                data = await self._receive(stream)
                h.receive_data(data)
                if not data:
                    break
                continue
            if isinstance(event, h11.Data):
                request.body_parts.append(bytes(event.data))
                request.first_body_data.set()
            elif isinstance(event, h11.EndOfMessage):
                request.complete = True
                request.body_done.set()
        while request.complete:
            if not await self._receive(stream):
                break
        request.peer_closed.set()
