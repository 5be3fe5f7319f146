"""A small HTTP/1.1 client on h11 and trio, for TCP and Unix sockets (06-loopd).

Two layers:

- `HttpConnection`: one connection, one request.  `open`, `send_request`,
  `receive_head`, `receive_body_data` (the body as it arrives: each call
  returns what one read from the socket completed, as one piece), `read_body`
  (bounded), `aclose`.  inferproxy forwards with this layer.
- `fetch`: a whole small exchange (health, props, slots, slot actions).

The streamed answer (`open_sse`) lives in `_sse_stream`.  h11 writes the
request and parses the response head and plain bodies; a chunked body is
decoded by `_chunked.ChunkedDecoder` (h11's per-chunk cost is too high for
one chunk per token, see docs/decisions.md).

Rules kept here: a new connection per request, never a half-close (the
server counts one as a disconnect and stops generating), timeouts as cancel
scopes (connect; request sent -> head and first event; idle between two
received chunks, a ping counts; the whole request), and leaving the
``async with`` for any reason closes the connection, which makes
llama-server stop generating.

Errors are split by fault: `InferenceUnavailable` (the environment: no
connection, a timeout, the server went away), `InferenceHTTPError` (the server
refused the request: a non-200 status), `InferenceStreamError` (the server
reported an error in the stream), `InferenceProtocolError` (the server sent
something that is not HTTP/SSE/JSON as expected).  Their messages escape all
server text and end with a runbook pointer.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import attrs
import h11
import trio

from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto._json import loads_object
from ._chunked import ChunkedDecoder, ChunkedError

MAX_ERROR_BODY: Final = 64 * 1024
MAX_BODY: Final = 8 * 1024 * 1024
_RECEIVE_SIZE: Final = 65536
_SHOWN_TEXT: Final = 300
_USER_AGENT: Final = b"boxmaker-loopd"

Phase = Literal["connect", "first_event", "idle", "total"]


# -- errors -------------------------------------------------------------------


class InferenceError(Exception):
    """Base class: talking to the inference server failed."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class InferenceUnavailable(InferenceError):
    """No connection, a timeout, or the server went away (the environment)."""


class InferenceTimeout(InferenceUnavailable):
    """One of the client's timeouts fired; `phase` says which."""

    def __init__(self, message: str, *, phase: Phase) -> None:
        self.phase = phase
        super().__init__(message)


class InferenceClosed(InferenceUnavailable):
    """The server closed the connection early, or a stream ended without [DONE]."""


class InferenceHTTPError(InferenceError):
    """A non-200 answer.  `error` is the body's ``error`` object when it had one."""

    def __init__(
        self, message: str, *, status: int, error: dict[str, Any] | None, text: str
    ) -> None:
        self.status = status
        self.error = error
        self.text = text
        super().__init__(message)

    @property
    def error_type(self) -> str | None:
        value = self.error.get("type") if self.error else None
        return value if isinstance(value, str) else None


class InferenceStreamError(InferenceError):
    """The server reported an error inside the stream (``data: {"error": ...}``
    or an older ``error: ...`` line)."""

    def __init__(self, message: str, *, error: dict[str, Any] | None, text: str) -> None:
        self.error = error
        self.text = text
        super().__init__(message)


class InferenceProtocolError(InferenceError):
    """The server's bytes are not the HTTP, SSE or JSON expected."""


class BodyTooLarge(InferenceProtocolError):
    """A body longer than the reader's limit."""


def shown(text: str, limit: int = _SHOWN_TEXT) -> str:
    """Server text made safe for a terminal or a log line: escaped, truncated."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return escape_line(text)


def describe_error_object(error: dict[str, Any]) -> str:
    """``type (code): message`` of an OpenAI-style error object, escaped."""
    parts: list[str] = []
    kind = error.get("type")
    code = error.get("code")
    message = error.get("message")
    if isinstance(kind, str):
        parts.append(shown(kind, 80))
    if isinstance(code, (int, str)) and not isinstance(code, bool):
        parts.append(f"({shown(str(code), 40)})")
    head = " ".join(parts)
    if isinstance(message, str):
        return f"{head}: {shown(message)}" if head else shown(message)
    return head or "an error object without a message"


# -- where the server is --------------------------------------------------------


@attrs.frozen(kw_only=True)
class Endpoint:
    """An HTTP server on a Unix socket (`unix_socket`) or at `host`:`port`."""

    unix_socket: Path | None = None
    host: str = "localhost"
    port: int = 80

    @classmethod
    def unix(cls, path: Path | str) -> Endpoint:
        return cls(unix_socket=Path(path))

    @classmethod
    def tcp(cls, host: str, port: int) -> Endpoint:
        return cls(host=host, port=port)

    @classmethod
    def from_url(cls, url: str) -> Endpoint:
        """``http://host:port`` (a path, query or credentials are refused)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"only http:// URLs are supported here, not {shown(url)!r}")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise ValueError(f"the URL must be http://host:port only, not {shown(url)!r}")
        try:
            port = parts.port or 80
        except ValueError as exc:
            raise ValueError(f"bad port in {shown(url)!r}") from exc
        if not parts.hostname:
            raise ValueError(f"no host in {shown(url)!r}")
        return cls(host=parts.hostname, port=port)

    @property
    def host_header(self) -> str:
        if self.unix_socket is not None:
            return "localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        if self.unix_socket is not None:
            return f"unix:{shown(str(self.unix_socket))}"
        return f"http://{shown(self.host_header)}"


@attrs.frozen(kw_only=True)
class Timeouts:
    """Seconds for each wait; None means no limit of that kind."""

    connect_s: float | None = 10.0
    first_event_s: float | None = 300.0
    idle_s: float | None = 60.0
    total_s: float | None = None


@attrs.frozen(kw_only=True)
class ResponseHead:
    status: int
    reason: str
    headers: tuple[tuple[bytes, bytes], ...]

    def header(self, name: bytes) -> bytes | None:
        """The last value of header `name` (lower case), if present."""
        found: bytes | None = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found

    @property
    def content_type(self) -> str:
        value = self.header(b"content-type") or b""
        return value.split(b";", 1)[0].strip().lower().decode("latin-1")


@attrs.frozen(kw_only=True)
class HttpResponse:
    head: ResponseHead
    body: bytes

    @property
    def status(self) -> int:
        return self.head.status


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("latin-1") if isinstance(value, str) else value


# -- one connection -----------------------------------------------------------------


class HttpConnection:
    """One h11 client connection for one request.  Use as ``async with``."""

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
                    " docs/runbook.md#inference-unavailable"
                ) from exc
        if scope.cancelled_caught:
            raise InferenceTimeout(
                f"cannot connect to the inference server at {endpoint} within {timeout_s} s"
                " docs/runbook.md#inference-unavailable",
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

    async def _send_all(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, OSError) as exc:
            self._h11.send_failed()
            raise InferenceClosed(
                f"the inference server at {self._endpoint} closed the connection"
                " while the request was sent docs/runbook.md#inference-unavailable"
            ) from exc

    async def _receive_raw(self) -> bytes:
        try:
            data = await self._stream.receive_some(_RECEIVE_SIZE)
        except (trio.BrokenResourceError, OSError) as exc:
            raise InferenceClosed(
                f"the connection to the inference server at {self._endpoint} broke"
                " docs/runbook.md#inference-unavailable"
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
                    " before the answer was complete docs/runbook.md#inference-unavailable"
                ) from exc
            raise InferenceProtocolError(
                f"the inference server at {self._endpoint} sent bad HTTP: {shown(str(exc))}"
                " docs/runbook.md#inference-unavailable"
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
                " docs/runbook.md#inference-unavailable"
            )

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
                        " docs/runbook.md#inference-unavailable"
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
                        f" {exc} docs/runbook.md#inference-unavailable"
                    ) from exc
                if decoder.done:
                    self._ended = True
                    return out or None
                if out:
                    return out
            elif self._eof:
                raise InferenceClosed(
                    f"the inference server at {self._endpoint} closed the connection"
                    " before the answer was complete docs/runbook.md#inference-unavailable"
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
                    f" {limit} bytes docs/runbook.md#inference-unavailable"
                )
            parts.append(data)


# -- error answers ------------------------------------------------------------------


def _content_length(head: ResponseHead) -> int | None:
    value = head.header(b"content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)


def http_error(endpoint: Endpoint, head: ResponseHead, body: bytes) -> InferenceHTTPError:
    """The typed error for a non-200 answer with `body`."""
    text = body.decode("utf-8", "replace")
    error: dict[str, Any] | None = None
    try:
        document = loads_object(body)
    except DecodeError:
        document = None
    if document is not None and isinstance(document.get("error"), dict):
        error = document["error"]
        detail = describe_error_object(error)
    elif text.strip():
        detail = shown(text.strip())
    else:
        detail = "no body"
    return InferenceHTTPError(
        f"the inference server at {endpoint} answered {head.status}"
        f" {shown(head.reason, 60)}: {detail} docs/runbook.md#inference-unavailable",
        status=head.status,
        error=error,
        text=text,
    )


def _error_too_large(endpoint: Endpoint, head: ResponseHead,
                     length: int | None) -> InferenceHTTPError:
    size = f"of {length} bytes, more than" if length is not None else "larger than"
    return InferenceHTTPError(
        f"the inference server at {endpoint} answered {head.status} with an error body"
        f" {size} the {MAX_ERROR_BODY} bytes read docs/runbook.md#inference-unavailable",
        status=head.status,
        error=None,
        text="",
    )


async def read_error(conn: HttpConnection, head: ResponseHead) -> InferenceHTTPError:
    """Read a non-200 answer's body (at most MAX_ERROR_BODY) into its error."""
    length = _content_length(head)
    if length is not None and length > MAX_ERROR_BODY:
        return _error_too_large(conn.endpoint, head, length)
    try:
        body = await conn.read_body(MAX_ERROR_BODY)
    except BodyTooLarge:
        return _error_too_large(conn.endpoint, head, None)
    return http_error(conn.endpoint, head, body)


def deadline_after(now: float, seconds: float | None) -> float:
    return math.inf if seconds is None else now + seconds


def timeout_error(endpoint: Endpoint, phase: Phase, seconds: float | None) -> InferenceTimeout:
    what = {
        "connect": "to connect",
        "first_event": "for the answer to start",
        "idle": "between two parts of the answer",
        "total": "for the whole request",
    }[phase]
    return InferenceTimeout(
        f"the inference server at {endpoint} took longer than {seconds} s {what}"
        " docs/runbook.md#inference-unavailable",
        phase=phase,
    )


# -- a whole small exchange ---------------------------------------------------------


async def fetch(
    endpoint: Endpoint,
    method: str,
    target: str,
    *,
    body: bytes | None = None,
    content_type: str = "application/json",
    timeout_s: float | None = 30.0,
    connect_timeout_s: float | None = 10.0,
    max_body: int = MAX_BODY,
) -> HttpResponse:
    """One request on a new connection; the whole answer, any status.

    A 200 body may have up to `max_body` bytes, any other at most
    MAX_ERROR_BODY.  The whole exchange, connecting included, takes at most
    `timeout_s`.
    """
    deadline = deadline_after(trio.current_time(), timeout_s)
    with trio.CancelScope(deadline=deadline) as scope:
        conn = await HttpConnection.open(endpoint, timeout_s=connect_timeout_s)
        async with conn:
            headers: list[tuple[str | bytes, str | bytes]] = [
                ("Accept", "application/json"),
                ("Connection", "close"),
            ]
            if body is not None:
                headers.append(("Content-Type", content_type))
            await conn.send_request(method, target, headers=headers, body=body)
            head = await conn.receive_head()
            if head.status == 200:
                data = await conn.read_body(max_body)
            else:
                length = _content_length(head)
                if length is not None and length > MAX_ERROR_BODY:
                    raise _error_too_large(conn.endpoint, head, length)
                try:
                    data = await conn.read_body(MAX_ERROR_BODY)
                except BodyTooLarge as exc:
                    raise _error_too_large(conn.endpoint, head, None) from exc
            return HttpResponse(head=head, body=data)
    assert scope.cancelled_caught
    raise timeout_error(endpoint, "total", timeout_s)
