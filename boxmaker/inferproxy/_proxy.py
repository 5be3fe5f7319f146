"""One client connection through inferproxy: h11 toward the client, the shared client upstream.

One request per connection (the answer says ``Connection: close``), the way
loopd and llama-server work anyway.  In order:

1. Read the request head (10 s).  Bad HTTP: 400.
2. Check it against the forwarded list (`_rules`): anything else gets 403 with
   a JSON error body; a declared body larger than `max_request_bytes` gets 413
   at once, before any of it is read.
3. Connect to the server (10 s): failing that, 502.
4. Send the head (the client's Authorization dropped, the key's added,
   hop-by-hop headers dropped) and the body, each piece as it arrives (at most
   30 s between two); a chunked body that grows past `max_request_bytes` closes
   the server connection and gets 413.
5. Forward the answer: head without hop-by-hop headers, then each piece of the
   body as the server sends it, never waiting for more.  A client that goes
   away (its end closed, or a send to it fails) cancels the exchange, and
   closing the server connection is what stops the generation; that is one
   info line (the access line, ending "the client went away"), never an error.  A server that
   breaks off mid-answer makes inferproxy close the client's connection without
   ending the body, so the client sees an incomplete answer, never a complete one.

Errors go into the log (escaped, never a header value, never the key); what
the client is told is a fixed JSON error in llama-server's shape.
"""

from __future__ import annotations

import logging
import ssl
from typing import Final

import attrs
import h11
import trio

from .._error_table import shown
from .._errors import PeerError
from .._http import InferenceError, InferenceUnavailable
from .._http.client import HttpConnection
from ..proto._escape import escape_line
from ._config import Upstream
from ._rules import (
    downstream_response_headers,
    error_body,
    is_forwarded,
    upstream_request_headers,
)
from ._upstream import CONNECT_TIMEOUT_S, open_upstream

log = logging.getLogger("inferproxy")

RECEIVE_SIZE: Final = 65536
MAX_HEAD_BYTES: Final = 64 * 1024
LINGER_S: Final = 1.0
LINGER_BYTES: Final = 1024 * 1024


@attrs.frozen(kw_only=True)
class ProxySettings:
    """What every connection needs; `api_key` never appears in a repr."""

    upstream: Upstream
    api_key: str | None = attrs.field(repr=False)
    tls: ssl.SSLContext | None
    max_request_bytes: int
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    head_timeout_s: float = 10.0
    body_idle_timeout_s: float = 30.0


class _ClientGone(PeerError):
    """The client closed its end or a send to it failed."""


class _BadRequest(PeerError):
    """The client's bytes are not HTTP/1.1 as h11 accepts it."""


class _TooLarge(PeerError):
    """A chunked request body grew past max_request_bytes."""


class _Stalled(PeerError):
    """The client stopped sending its request body."""


def _shown_target(target: bytes) -> str:
    text = target.decode("latin-1")
    if len(text) > 200:
        text = text[:200] + "..."
    return escape_line(text)


class _Exchange:
    """The state of one client connection."""

    def __init__(self, stream: trio.abc.Stream, settings: ProxySettings) -> None:
        self.stream = stream
        self.settings = settings
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.client_gone = False
        self.status: int | None = None
        self.response_bytes = 0
        self.what = "-"

    # -- the client's side ------------------------------------------------------------

    async def _send(self, event: h11.Event) -> None:
        try:
            data = self.conn.send(event)
        except h11.LocalProtocolError as exc:  # pragma: no cover - a bug of ours
            raise RuntimeError(f"inferproxy built an invalid answer: {exc}") from exc
        if not data:
            return
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.conn.send_failed()
            self.client_gone = True
            raise _ClientGone from exc

    async def _next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise _BadRequest(str(exc)) from exc
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.client_gone = True
                raise _ClientGone from exc
            if not data:
                self.client_gone = True
                raise _ClientGone
            self.conn.receive_data(bytes(data))

    async def _answer_error(self, status: int, kind: str, message: str) -> None:
        """A JSON error answer, then a short linger so the client can read it."""
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = error_body(status, kind, message)
        headers = [(b"Content-Type", b"application/json; charset=utf-8"),
                   (b"Content-Length", b"%d" % len(body)), (b"Connection", b"close")]
        self.status = status
        try:
            await self._send(h11.Response(status_code=status, headers=headers))
            await self._send(h11.Data(data=body))
            await self._send(h11.EndOfMessage())
        except h11.LocalProtocolError:  # pragma: no cover - h11 refused to answer
            return
        await self._linger()

    async def _linger(self) -> None:
        """End our side, then read and drop what the client still sends (bounded),
        so that closing does not reset the connection before it read the answer."""
        if isinstance(self.stream, trio.abc.HalfCloseableStream):
            try:
                await self.stream.send_eof()  # the answer is complete: say so at once
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
        drained = 0
        with trio.move_on_after(LINGER_S):
            while drained < LINGER_BYTES:
                try:
                    data = await self.stream.receive_some(RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return
                if not data:
                    return
                drained += len(data)

    async def _watch_client(self, scope: trio.CancelScope) -> None:
        """While the answer streams: the client's end closing cancels `scope`."""
        while True:
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                self.client_gone = True
                scope.cancel()
                return
            # Anything after the request (a pipelined request) is not served:
            # the answer says Connection: close.

    # -- one exchange ---------------------------------------------------------------------

    async def run(self) -> None:
        settings = self.settings
        with trio.move_on_after(settings.head_timeout_s) as head_scope:
            try:
                request = await self._next_event()
            except _BadRequest as exc:
                log.info("bad request from a client: %s", escape_line(str(exc)))
                await self._answer_error(400, "invalid_request_error",
                                         "inferproxy: the request is not valid HTTP/1.1")
                return
        if head_scope.cancelled_caught:
            await self._answer_error(408, "timeout_error",
                                     "inferproxy: the request head did not arrive in time")
            return
        if not isinstance(request, h11.Request):  # pragma: no cover - h11 gives a Request first
            return
        method, target = bytes(request.method), bytes(request.target)
        self.what = f"{method.decode('ascii', 'replace')} {_shown_target(target)}"
        if not is_forwarded(method, target):
            log.warning("refused %s: not a forwarded request", self.what)
            await self._answer_error(
                403, "forbidden",
                "inferproxy forwards only GET /health, /props and /slots, and POST"
                " /v1/chat/completions, /slots/N?action=save|restore|erase, /tokenize,"
                " /detokenize and /apply-template",
            )
            return
        headers = [(bytes(k), bytes(v)) for k, v in request.headers]
        length, chunked = _framing(headers)
        if length is not None and length > settings.max_request_bytes:
            log.warning("refused %s: a body of %d bytes (limit %d)", self.what, length,
                        settings.max_request_bytes)
            await self._answer_error(413, "request_too_large", self._too_large_text())
            return
        if self.conn.client_is_waiting_for_100_continue:
            await self._send(h11.InformationalResponse(status_code=100, headers=[]))
        try:
            upstream = await open_upstream(settings.upstream, tls=settings.tls,
                                           timeout_s=settings.connect_timeout_s)
        except InferenceUnavailable as exc:
            log.warning("%s: %s", self.what, shown(exc.message, exc, joiner=" "))
            await self._answer_error(502, "unavailable_error",
                                     "inferproxy cannot reach the inference server")
            return
        try:
            async with upstream:
                await self._exchange(upstream, headers, method, target, length, chunked)
        except _TooLarge:
            log.warning("refused %s: the chunked body passed %d bytes", self.what,
                        settings.max_request_bytes)
            await self._answer_error(413, "request_too_large", self._too_large_text())
        except _Stalled:
            log.warning("%s: the client stopped sending its body", self.what)
            await self._answer_error(408, "timeout_error",
                                     "inferproxy: the request body stopped arriving")
        except _BadRequest as exc:
            log.info("%s: a bad request body: %s", self.what, escape_line(str(exc)))
            await self._answer_error(400, "invalid_request_error",
                                     "inferproxy: the request body is not valid HTTP/1.1")

    def _too_large_text(self) -> str:
        return (f"inferproxy: request bodies may have at most"
                f" {self.settings.max_request_bytes} bytes")

    async def _exchange(self, upstream: HttpConnection, headers: list[tuple[bytes, bytes]],
                        method: bytes, target: bytes, length: int | None,
                        chunked: bool) -> None:
        settings = self.settings
        try:
            await upstream.send_head(method, target, upstream_request_headers(
                headers, host=settings.upstream.host_header.encode("idna"),
                api_key=settings.api_key, content_length=length, chunked=chunked))
            await self._forward_request_body(upstream)
        except InferenceError as exc:
            log.warning("%s: %s", self.what, shown(exc.message, exc, joiner=" "))
            await self._answer_error(502, "unavailable_error",
                                     "inferproxy: the inference server broke off the request")
            return
        failed: InferenceError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_client, nursery.cancel_scope)
            try:
                await self._forward_response(upstream)
            except InferenceError as exc:
                failed = exc
            except _ClientGone:
                # Caught here, inside the nursery: escaping it, it would leave
                # wrapped in an ExceptionGroup that no `except _ClientGone` matches.
                pass  # `_send` set client_gone; handle_connection says it, once
            nursery.cancel_scope.cancel()
        if not self.client_gone and failed is not None:
            log.warning("%s: %s", self.what, shown(failed.message, failed, joiner=" "))
            if self.status is None:
                await self._answer_error(502, "unavailable_error",
                                         "inferproxy: the inference server did not answer")

    async def _forward_request_body(self, upstream: HttpConnection) -> None:
        limit = self.settings.max_request_bytes
        received = 0
        while True:
            with trio.move_on_after(self.settings.body_idle_timeout_s) as scope:
                event = await self._next_event()
            if scope.cancelled_caught:
                raise _Stalled
            if isinstance(event, h11.Data):
                received += len(event.data)
                if received > limit:
                    raise _TooLarge
                await upstream.send_body_data(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                await upstream.send_end()
                return
            else:  # pragma: no cover - h11 gives only Data and EndOfMessage here
                raise _BadRequest(f"unexpected {type(event).__name__} in a request body")

    async def _forward_response(self, upstream: HttpConnection) -> None:
        head = await upstream.receive_head()
        self.status = head.status
        await self._send(h11.Response(status_code=head.status,
                                      headers=downstream_response_headers(list(head.headers)),
                                      reason=head.reason.encode("latin-1")))
        while True:
            data = await upstream.receive_body_data()
            if data is None:
                break
            self.response_bytes += len(data)
            await self._send(h11.Data(data=data))
        await self._send(h11.EndOfMessage())


def _framing(headers: list[tuple[bytes, bytes]]) -> tuple[int | None, bool]:
    """The request's Content-Length (h11 has checked it) and whether it is chunked."""
    length: int | None = None
    chunked = False
    for name, value in headers:
        lower = name.lower()
        if lower == b"content-length":
            length = int(value)
        elif lower == b"transfer-encoding":
            chunked = True
    return (None if chunked else length), chunked


async def handle_connection(stream: trio.abc.Stream, settings: ProxySettings) -> None:
    """Serve one client connection, then close it.  Raises nothing but bugs."""
    exchange = _Exchange(stream, settings)
    started = trio.current_time()
    try:
        await exchange.run()
    except _ClientGone:
        exchange.client_gone = True
    finally:
        await trio.aclose_forcefully(stream)
    # One info line per connection: the access line, which also says when the
    # client went away (a client closing after [DONE] is ordinary, never an error).
    gone = "; the client went away" if exchange.client_gone else ""
    if exchange.status is not None:
        log.info("%s -> %d, %d bytes, %.3f s%s", exchange.what, exchange.status,
                 exchange.response_bytes, trio.current_time() - started, gone)
    elif exchange.client_gone:
        log.info("%s: the client went away, %.3f s", exchange.what,
                 trio.current_time() - started)
