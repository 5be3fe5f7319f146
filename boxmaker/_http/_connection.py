"""One HTTP/1.1 client connection on h11 and trio, over TCP, a Unix socket or TLS (06-loopd).

`HttpConnection`: one connection, one request.  `open` (TCP or Unix socket),
or the constructor over any connected trio stream (inferproxy's TLS one);
then the request either whole (`send_request`: head and body in one write)
or streamed (`send_head`, `send_body_data`..., `send_end`: the body sent
piece by piece as it arrives, which is how inferproxy forwards); then
`receive_head`, `receive_body_data` (the body as it arrives: each call
returns what one read from the socket completed, as one piece), `read_body`
(bounded), `aclose`; or, for a chunked body decoded by the caller,
`receive_raw_body` (the SSE stream's, `_sse_chunked`).

h11 writes the request and parses the response head and plain bodies; a
chunked body is decoded by `_chunked.ChunkedDecoder` (h11's per-chunk cost is
too high for one chunk per token, see docs/decisions.md).

Rules kept here: a new connection per request, never a half-close (the
server counts one as a disconnect and stops generating), and leaving the
``async with`` for any reason closes the connection, which makes
llama-server stop generating.  The timeouts are the callers' cancel scopes
(`_fetch`, `_sse_stream`).  The errors are `_errors`'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

import h11
import trio

from ._chunked import ChunkedDecoder, ChunkedError
from ._endpoint import Endpoint, ResponseHead
from ._errors import (
    BodyTooLarge,
    InferenceClosed,
    InferenceProtocolError,
    InferenceTimeout,
    InferenceUnavailable,
    shown,
)

_RECEIVE_SIZE: Final = 65536
_USER_AGENT: Final = b"boxmaker-loopd"


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("latin-1") if isinstance(value, str) else value


class HttpConnection:
    """One h11 client connection for one request.  Use as ``async with``.

    `open` connects; ``HttpConnection(stream, endpoint)`` takes a stream
    already connected (and, for TLS, handshaken), `endpoint` naming the
    server in messages and in the Host header of `send_request`.
    """

    def __init__(self, stream: trio.abc.Stream, endpoint: Endpoint) -> None:
        self._stream = stream
        self._endpoint = endpoint
        self._h11 = h11.Connection(h11.CLIENT)
        self._eof = False
        self._ended = False
        self._method = b""
        # set for a chunked response body: decoded here, not by h11 (see _chunked)
        self._chunked: ChunkedDecoder | None = None
        self._pending = b""  # body bytes h11 had read past the head

    @classmethod
    async def open(cls, endpoint: Endpoint, *, timeout_s: float | None = None) -> HttpConnection:
        """Connect to `endpoint` within `timeout_s`."""
        with trio.move_on_after(math.inf if timeout_s is None else timeout_s) as scope:
            try:
                if endpoint.unix_socket is not None:
                    stream: trio.abc.Stream = await trio.open_unix_socket(
                        str(endpoint.unix_socket)
                    )
                else:
                    stream = await trio.open_tcp_stream(endpoint.host, endpoint.port)
            except OSError as exc:
                reason = shown(exc.strerror or str(exc))
                raise InferenceUnavailable(
                    f"cannot connect to the inference server at {endpoint}: {reason}"
                ) from exc
        if scope.cancelled_caught:
            raise InferenceTimeout(
                f"cannot connect to the inference server at {endpoint} within {timeout_s} s",
                phase="connect",
            )
        return cls(stream, endpoint)

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    async def __aenter__(self) -> HttpConnection:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (never a half-close first)."""
        await trio.aclose_forcefully(self._stream)

    async def send_request(
        self,
        method: str,
        target: str,
        *,
        headers: Sequence[tuple[str | bytes, str | bytes]] = (),
        body: bytes | None = None,
    ) -> None:
        """Send the request head and `body` (with its Content-Length)."""
        given = [(_as_bytes(k), _as_bytes(v)) for k, v in headers]
        names = {k.lower() for k, _ in given}
        all_headers: list[tuple[bytes, bytes]] = []
        if b"host" not in names:
            all_headers.append((b"Host", self._endpoint.host_header.encode("idna")))
        if b"user-agent" not in names:
            all_headers.append((b"User-Agent", _USER_AGENT))
        all_headers.extend(given)
        if body is not None and b"content-length" not in names:
            all_headers.append((b"Content-Length", b"%d" % len(body)))
        self._method = method.encode("ascii").upper()
        try:
            out = self._h11.send(h11.Request(method=method, target=target, headers=all_headers))
            if body:
                out += self._h11.send(h11.Data(data=body))
            out += self._h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise ValueError(f"cannot send this request: {exc}") from exc
        await self._send_all(out)

    async def send_head(self, method: bytes, target: bytes,
                        headers: Sequence[tuple[bytes, bytes]]) -> None:
        """Send the request head alone, `headers` exactly as given.

        The framing headers in `headers` (Content-Length or Transfer-Encoding)
        decide the body's form; send it with `send_body_data` and `send_end`.
        """
        try:
            data = self._h11.send(h11.Request(method=method, target=target, headers=list(headers)))
        except h11.LocalProtocolError as exc:
            raise ValueError(f"cannot send this request: {exc}") from exc
        self._method = method.upper()
        await self._send_all(data)

    async def send_body_data(self, data: bytes) -> None:
        """Send one piece of the request body as it is (as one chunk when chunked)."""
        if not data:
            return
        out = self._h11.send(h11.Data(data=data))
        if out:
            await self._send_all(out)

    async def send_end(self) -> None:
        """End the request body (the terminating chunk when chunked)."""
        out = self._h11.send(h11.EndOfMessage())
        if out:
            await self._send_all(out)

    async def _send_all(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, OSError) as exc:
            self._h11.send_failed()
            raise InferenceClosed(
                f"the inference server at {self._endpoint} closed the connection"
                " while the request was sent"
            ) from exc

    async def _receive_raw(self) -> bytes:
        try:
            data = await self._stream.receive_some(_RECEIVE_SIZE)
        except (trio.BrokenResourceError, OSError) as exc:
            raise InferenceClosed(
                f"the connection to the inference server at {self._endpoint} broke"
            ) from exc
        if not data:
            self._eof = True
        return bytes(data) if type(data) is not bytes else data

    async def _receive(self) -> None:
        self._h11.receive_data(await self._receive_raw())

    def _next_event(self) -> Any:
        try:
            return self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            if self._eof:
                raise InferenceClosed(
                    f"the inference server at {self._endpoint} closed the connection"
                    " before the answer was complete"
                ) from exc
            raise InferenceProtocolError(
                f"the inference server at {self._endpoint} sent bad HTTP: {shown(str(exc))}"
            ) from exc

    async def receive_head(self) -> ResponseHead:
        """Wait for the response head (1xx interim answers are skipped)."""
        while True:
            event = self._next_event()
            if event is h11.NEED_DATA:
                await self._receive()
                continue
            if type(event) is h11.Response:
                head = ResponseHead(
                    status=event.status_code,
                    reason=event.reason.decode("latin-1"),
                    headers=tuple((bytes(k), bytes(v)) for k, v in event.headers),
                )
                if (
                    head.header(b"transfer-encoding") == b"chunked"
                    and self._method != b"HEAD"
                    and head.status not in (204, 304)
                ):
                    self._chunked = ChunkedDecoder()
                    self._pending, _ = self._h11.trailing_data
                return head
            if type(event) is h11.InformationalResponse:
                continue
            raise InferenceProtocolError(  # pragma: no cover - h11 allows nothing else here
                f"unexpected {type(event).__name__} before the response head"
            )

    @property
    def chunked(self) -> bool:
        """The response body is chunked (known once the head is received)."""
        return self._chunked is not None

    async def receive_raw_body(self) -> bytes:
        """For a chunked body its caller decodes itself (`_sse_chunked`): the next
        bytes as read, the body's framing included (first those h11 had read past
        the head).  b"" once the server closed the connection."""
        data = self._pending
        if data:
            self._pending = b""
            return data
        if self._eof:
            return b""
        return await self._receive_raw()

    async def receive_body_data(self) -> bytes | None:
        """The next piece of the body: what the next socket read completed.

        Returns None once the body is complete.  Never returns b"".
        """
        if self._chunked is not None:
            return await self._receive_chunked(self._chunked)
        parts: list[bytes] = []
        while True:
            while not self._ended:
                event = self._next_event()
                kind = type(event)
                if kind is h11.Data:
                    parts.append(event.data)
                elif event is h11.NEED_DATA:
                    break
                elif kind is h11.EndOfMessage:
                    self._ended = True
                else:  # pragma: no cover - h11 allows nothing else in a body
                    raise InferenceProtocolError(
                        f"unexpected {kind.__name__} in the response body"
                    )
            if parts:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            if self._ended:
                return None
            await self._receive()

    async def _receive_chunked(self, decoder: ChunkedDecoder) -> bytes | None:
        if self._ended:
            return None
        data = self._pending
        self._pending = b""
        while True:
            if data:
                try:
                    out = decoder.feed(data)
                except ChunkedError as exc:
                    raise InferenceProtocolError(
                        f"the inference server at {self._endpoint} sent a bad chunked body:"
                        f" {exc}"
                    ) from exc
                if decoder.done:
                    self._ended = True
                    return out or None
                if out:
                    return out
            elif self._eof:
                raise InferenceClosed(
                    f"the inference server at {self._endpoint} closed the connection"
                    " before the answer was complete"
                )
            data = await self._receive_raw()

    async def read_body(self, limit: int) -> bytes:
        """The whole body, refusing one larger than `limit` bytes."""
        parts: list[bytes] = []
        size = 0
        while True:
            data = await self.receive_body_data()
            if data is None:
                return b"".join(parts)
            size += len(data)
            if size > limit:
                raise BodyTooLarge(
                    f"the inference server at {self._endpoint} sent a body larger than"
                    f" {limit} bytes"
                )
            parts.append(data)


