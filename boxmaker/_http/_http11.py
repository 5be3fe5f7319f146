"""A small HTTP/1.1 server and client on h11 and trio, for the witness protocol
and the approval page.

Bounded everywhere: a request or response body is at most `MAX_BODY` bytes,
headers come from h11's own limit, each connection and each request has a
deadline (a TLS handshake too).  A failure in one connection (a bad request, a
TLS failure, a peer reset, a bug in the handler) is contained to that
connection.  HTTP/1.1 only: over TLS the server offers ALPN `http/1.1` alone,
and an HTTP/2 preface or an `Upgrade: h2c` is answered as HTTP/1.1 (issue 22
item 1: hypercorn's HTTP/2 ended the approval page).  The server keeps
connections alive (the C2SP witness spec recommends it) up to
`MAX_REQUESTS_PER_CONNECTION`.

The server's deadlines (issue 22 item 10): the next request within
`IDLE_TIMEOUT_S`, its body within `REQUEST_TIMEOUT_S`, each answer written
within `WRITE_TIMEOUT_S` (a peer that pipelines requests and never reads is
dropped), and the whole connection within `CONNECTION_TIMEOUT_S`.  At most
`max_connections` (default `MAX_CONNECTIONS`) are served at once (past it,
accepting pauses); when
descriptors or memory run out, accepting pauses too, with one log line per
`PAUSE_LOG_INTERVAL_S`, not one per failed accept.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable

import attrs
import h11
import trio

from .._errors import PeerError, UnavailableError
from ..proto._grammar import Url

MAX_BODY = 256 * 1024
REQUEST_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 30.0
MAX_REQUESTS_PER_CONNECTION = 1000
WRITE_TIMEOUT_S = 10.0
CONNECTION_TIMEOUT_S = 300.0
MAX_CONNECTIONS = 256
TLS_HANDSHAKE_TIMEOUT_S = 10.0
PAUSE_LOG_INTERVAL_S = 60.0
_PAUSE_FIRST_S = 0.01
_PAUSE_MAX_S = 1.0
_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

log = logging.getLogger("boxmaker.http")


@attrs.frozen(kw_only=True)
class HttpRequest:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


@attrs.frozen(kw_only=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    """Further headers (never content-type or content-length, which come from the fields)."""


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]
OwnAnswer = Callable[[int, str], HttpResponse]
"""How the server words the answers it makes itself (400 and 413): status, reason."""


def plain_answer(status: int, reason: str) -> HttpResponse:
    return HttpResponse(status=status, body=reason.encode("ascii") + b"\n")


class HttpError(UnavailableError):
    """The peer cannot be reached, or answered something that is not HTTP/1.1."""


class _TooBig(PeerError):
    pass


async def _read_body(conn: h11.Connection, stream: trio.abc.Stream) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        event = await _next_event(conn, stream)
        if isinstance(event, h11.Data):
            total += len(event.data)
            if total > MAX_BODY:
                raise _TooBig
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return b"".join(chunks)
        else:
            raise h11.RemoteProtocolError("unexpected event in a body")


async def _next_event(conn: h11.Connection, stream: trio.abc.Stream) -> object:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(bytes(data))
            continue
        return event


async def _send(conn: h11.Connection, stream: trio.abc.Stream, *events: h11.Event) -> None:
    for event in events:
        data = conn.send(event)
        if data:
            await stream.send_all(data)


async def _respond(conn: h11.Connection, stream: trio.abc.Stream,
                   response: HttpResponse, *, close: bool = False, head: bool = False) -> None:
    headers = [("content-type", response.content_type),
               ("content-length", str(len(response.body))), *response.headers]
    if close:
        headers.append(("connection", "close"))
    body = [] if head else [h11.Data(data=response.body)]  # HEAD: the length, no body
    await _send(conn, stream, h11.Response(status_code=response.status, headers=headers),
                *body, h11.EndOfMessage())


def _abort_on_close(stream: trio.abc.Stream) -> None:
    """Make the close a reset: a FIN would wait forever behind answers the peer
    does not read, and the kernel would keep them (SO_LINGER 0)."""
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if isinstance(stream, trio.SocketStream):
        with contextlib.suppress(OSError):
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def serve_connection(stream: trio.abc.Stream, handler: Handler, *,
                           own_answer: OwnAnswer = plain_answer) -> None:
    """Serve requests on one connection until it closes, misbehaves or runs out of time."""
    with trio.move_on_after(CONNECTION_TIMEOUT_S):
        await _serve_requests(stream, handler, own_answer)


async def _serve_requests(stream: trio.abc.Stream, handler: Handler,
                          own_answer: OwnAnswer) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16 * 1024)
    try:
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            with trio.move_on_after(IDLE_TIMEOUT_S) as idle:
                event = await _next_event(conn, stream)
            if idle.cancelled_caught or not isinstance(event, h11.Request):
                return
            if event.http_version not in (b"1.0", b"1.1"):  # h11 parses "PRI * HTTP/2.0"
                with trio.move_on_after(WRITE_TIMEOUT_S):
                    await _respond(conn, stream, own_answer(505, "HTTP/1.1 only"), close=True)
                return
            with trio.move_on_after(REQUEST_TIMEOUT_S) as reading:
                try:
                    body = await _read_body(conn, stream)
                except _TooBig:
                    with trio.move_on_after(WRITE_TIMEOUT_S) as writing:
                        await _respond(conn, stream, own_answer(413, "too big"), close=True)
                    if writing.cancelled_caught:
                        _abort_on_close(stream)
                    return
            if reading.cancelled_caught:
                return
            request = HttpRequest(
                method=event.method.decode("ascii", "replace"),
                target=event.target.decode("ascii", "replace"),
                headers=tuple((k.decode("latin-1"), v.decode("latin-1"))
                              for k, v in event.headers),
                body=body,
            )
            response = await handler(request)
            with trio.move_on_after(WRITE_TIMEOUT_S) as writing:
                await _respond(conn, stream, response, head=event.method == b"HEAD")
            if writing.cancelled_caught:  # the peer does not read its answers
                _abort_on_close(stream)
                return
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except h11.RemoteProtocolError:
        with contextlib.suppress(h11.LocalProtocolError, trio.BrokenResourceError,
                                 trio.ClosedResourceError), trio.move_on_after(WRITE_TIMEOUT_S):
            await _respond(conn, stream, own_answer(400, "bad request"), close=True)
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
        pass


def server_tls(cert: str, key: str) -> ssl.SSLContext:
    """A server-side TLS context that offers HTTP/1.1 alone over ALPN."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["http/1.1"])
    return context


async def serve_tcp(handler: Handler, host: str, port: int, *,
                    ssl_context: ssl.SSLContext | None = None,
                    max_connections: int = MAX_CONNECTIONS,
                    own_answer: OwnAnswer = plain_answer,
                    after_close: Callable[[], object] | None = None,
                    task_status: trio.TaskStatus[list[trio.SocketListener]]
                    = trio.TASK_STATUS_IGNORED) -> None:
    """Listen on host:port and serve every connection in its own task (TLS with
    `ssl_context`), at most `max_connections` at once (past it, accepting pauses);
    `after_close` is called when each connection is closed."""
    listeners = await trio.open_tcp_listeners(port, host=host)

    async def one(transport: trio.SocketStream) -> None:
        stream: trio.abc.Stream = transport
        try:
            if ssl_context is not None:
                stream = trio.SSLStream(transport, ssl_context, server_side=True,
                                        https_compatible=True)
                with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_S) as handshake:
                    await stream.do_handshake()
                if handshake.cancelled_caught:
                    return
            await serve_connection(stream, handler, own_answer=own_answer)
        except trio.BrokenResourceError:
            pass  # a failed handshake, a reset: that connection only
        except Exception:
            log.exception("a connection failed (contained)")
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()
            await trio.aclose_forcefully(transport)
            if after_close is not None:
                after_close()

    limiter = trio.CapacityLimiter(max_connections)
    pauses = _PauseLog()
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(_accept_loop, listener, one, nursery, limiter, pauses)
        task_status.started(listeners)


class _PauseLog:
    """One log line per `PAUSE_LOG_INTERVAL_S` while accepting pauses, with a count."""

    def __init__(self) -> None:
        self.logged_at: float | None = None
        self.since = 0

    def note(self, error: OSError) -> None:
        now = trio.current_time()
        self.since += 1
        if self.logged_at is None or now - self.logged_at >= PAUSE_LOG_INTERVAL_S:
            log.warning("accepting paused: %s (%d failed accepts in the last %g s at most; "
                        "the next line in %g s at the earliest)",
                        error.strerror or error, self.since, PAUSE_LOG_INTERVAL_S,
                        PAUSE_LOG_INTERVAL_S)
            self.logged_at = now
            self.since = 0


async def _accept_loop(listener: trio.SocketListener,
                       one: Callable[[trio.SocketStream], Awaitable[None]],
                       nursery: trio.Nursery, limiter: trio.CapacityLimiter,
                       pauses: _PauseLog) -> None:
    """Accept while fewer than `MAX_CONNECTIONS` are served; pause when out of descriptors.

    The listener is closed when the loop ends (as `trio.serve_listeners` does)."""
    async with listener:
        await _accept_forever(listener, one, nursery, limiter, pauses)


async def _accept_forever(listener: trio.SocketListener,
                          one: Callable[[trio.SocketStream], Awaitable[None]],
                          nursery: trio.Nursery, limiter: trio.CapacityLimiter,
                          pauses: _PauseLog) -> None:
    pause = _PAUSE_FIRST_S
    while True:
        token = object()
        await limiter.acquire_on_behalf_of(token)
        try:
            stream = await listener.accept()
        except OSError as exc:
            limiter.release_on_behalf_of(token)
            if exc.errno not in _CAPACITY_ERRNOS:
                raise
            pauses.note(exc)
            await trio.sleep(pause)
            pause = min(pause * 2, _PAUSE_MAX_S)
            continue
        except BaseException:
            limiter.release_on_behalf_of(token)
            raise
        pause = _PAUSE_FIRST_S
        nursery.start_soon(_served, one, stream, limiter, token)


async def _served(one: Callable[[trio.SocketStream], Awaitable[None]],
                  stream: trio.SocketStream, limiter: trio.CapacityLimiter,
                  token: object) -> None:
    try:
        await one(stream)
    finally:
        limiter.release_on_behalf_of(token)


# -- the client --------------------------------------------------------------------


async def request(url: Url, method: str, path: str, body: bytes = b"", *,
                  timeout_s: float = REQUEST_TIMEOUT_S,
                  content_type: str = "text/plain; charset=utf-8") -> HttpResponse:
    """One request on a fresh connection.  Raises HttpError (and trio.TooSlowError)."""
    with trio.fail_after(timeout_s):
        try:
            if url.scheme == "https":
                stream: trio.abc.Stream = await trio.open_ssl_over_tcp_stream(
                    url.host, url.effective_port, ssl_context=ssl.create_default_context())
            else:
                stream = await trio.open_tcp_stream(url.host, url.effective_port)
        except OSError as exc:
            raise HttpError(f"cannot connect to {url.host}:{url.effective_port}: "
                            f"{exc.strerror or exc}") from exc
        async with stream:
            conn = h11.Connection(h11.CLIENT)
            host = url.host if ":" not in url.host else f"[{url.host}]"
            headers = [("host", f"{host}:{url.effective_port}"), ("content-length", str(len(body))),
                       ("content-type", content_type), ("connection", "close")]
            try:
                await _send(conn, stream,
                            h11.Request(method=method, target=url.path_prefix + path,
                                        headers=headers),
                            h11.Data(data=body), h11.EndOfMessage())
                event = await _next_event(conn, stream)
                if not isinstance(event, h11.Response):
                    raise HttpError("the answer is not an HTTP response")
                answer = await _read_body(conn, stream)
            except _TooBig as exc:
                raise HttpError("the answer is too big") from exc
            except (h11.ProtocolError, trio.BrokenResourceError, OSError) as exc:
                raise HttpError(f"the exchange failed: {exc}") from exc
            kind = dict(event.headers).get(b"content-type", b"").decode("latin-1")
            return HttpResponse(status=event.status_code, body=answer, content_type=kind)
