"""A streamed OpenAI-style answer over the h11 client (06-loopd): SSE events as they arrive.

``async with open_sse(endpoint, target, body, timeouts=...) as stream:
async for event in stream`` yields every SSE event as soon as the read that
completed it returns; ``data: [DONE]`` is the only normal end.  Or
``await stream.receive_data()``: the data of every event one read completed,
as one list (what `ChatStream` reads: no step per event).  A chunked body is
decoded together with its events (`_sse_chunked`).  Errors before
the stream (a non-200 status) raise `InferenceHTTPError`; an error event
(``data: {"error": ...}`` or an older ``error: ...`` line) raises
`InferenceStreamError`; an end without [DONE] raises `InferenceClosed`.

Timeouts are cancel scopes around each wait, never held across a yield:
connect; request sent -> response head and first event; idle between two
received chunks (a ping counts); the whole request.  Leaving the ``async
with`` for any reason closes the connection, which makes llama-server stop
generating.  One new connection per request; never a half-close.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import TracebackType

import trio

from ._chunked import ChunkedError
from ._connection import HttpConnection
from ._endpoint import Endpoint, ResponseHead, Timeouts, deadline_after
from ._error_answers import stream_error, timeout_error
from ._errors import (
    InferenceClosed,
    InferenceProtocolError,
    InferenceStreamError,
    InferenceTimeout,
    shown,
)
from ._fetch import read_error
from ._sse import SSEError, SSEEvent, SSEParser
from ._sse_chunked import ChunkedEvents, Item, items_of

_new_tuple = tuple.__new__


class SSEStream:
    """A streamed answer: ``async with open_sse(...) as stream: async for event in stream``.

    Entering connects, sends the request and waits for the response head
    (a non-200 answer raises `InferenceHTTPError`; another content type than
    ``text/event-stream`` raises `InferenceProtocolError`).  Iterating yields
    each SSE event as soon as the chunk completing it is read, except
    ``data: [DONE]``, which ends the iteration.  An error event raises
    `InferenceStreamError`; an end of the body or connection before [DONE]
    raises `InferenceClosed`.  `pings` counts comment lines seen.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        method: str,
        target: str,
        body: bytes,
        *,
        timeouts: Timeouts,
        headers: Sequence[tuple[str | bytes, str | bytes]] = (),
    ) -> None:
        self._endpoint = endpoint
        self._method = method
        self._target = target
        self._body = body
        self._timeouts = timeouts
        self._headers = headers
        self._conn: HttpConnection | None = None
        self._parser = SSEParser()
        self._chunked: ChunkedEvents | None = None  # a chunked body: decoded with its events
        self._items: list[Item] = []  # what the last read completed; _next: the next to hand
        self._next = 0
        self._total_deadline = math.inf
        self._first_deadline = math.inf
        self._got_first = False
        self._done = False
        self._plain = False  # the held items need no [DONE]/error checks
        self.head: ResponseHead | None = None

    @property
    def pings(self) -> int:
        return self._parser.comments

    async def __aenter__(self) -> SSEStream:
        timeouts = self._timeouts
        now = trio.current_time()
        self._total_deadline = deadline_after(now, timeouts.total_s)
        with trio.CancelScope(deadline=self._total_deadline) as scope:
            conn = await HttpConnection.open(self._endpoint, timeout_s=timeouts.connect_s)
        if scope.cancelled_caught:
            raise timeout_error(self._endpoint, "total", timeouts.total_s)
        self._conn = conn
        try:
            await self._start()
        except BaseException:
            await conn.aclose()
            raise
        return self

    async def _start(self) -> None:
        conn = self._conn
        assert conn is not None
        timeouts = self._timeouts
        headers: list[tuple[str | bytes, str | bytes]] = [
            ("Accept", "text/event-stream"),
            ("Content-Type", "application/json"),
            ("Connection", "close"),
            *self._headers,
        ]
        with trio.CancelScope(deadline=self._total_deadline) as scope:
            await conn.send_request(self._method, self._target, headers=headers, body=self._body)
            self._first_deadline = deadline_after(trio.current_time(), timeouts.first_event_s)
            scope.deadline = min(self._total_deadline, self._first_deadline)
            head = await conn.receive_head()
            self.head = head
            if head.status != 200:
                raise await read_error(conn, head)
        if scope.cancelled_caught:
            raise self._which_timeout()
        if head.content_type != "text/event-stream":
            raise InferenceProtocolError(
                f"the inference server at {self._endpoint} answered with content type"
                f" {shown(head.content_type, 80)!r}, not text/event-stream"
            )
        if conn.chunked:
            self._chunked = ChunkedEvents(self._parser)

    def _which_timeout(self) -> InferenceTimeout:
        t = self._timeouts
        if not self._got_first:
            if self._first_deadline <= self._total_deadline:
                return timeout_error(self._endpoint, "first_event", t.first_event_s)
            return timeout_error(self._endpoint, "total", t.total_s)
        if trio.current_time() >= self._total_deadline:
            return timeout_error(self._endpoint, "total", t.total_s)
        return timeout_error(self._endpoint, "idle", t.idle_s)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.aclose()

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> SSEEvent:
        items = self._items
        while self._next >= len(items):
            if self._done:
                raise StopAsyncIteration
            await self._receive_more()
            items = self._items
        item = items[self._next]
        self._next += 1
        if type(item) is str:
            if not self._plain:
                self._check_data(item)
            return _new_tuple(SSEEvent, (item, None, None, None, ()))
        assert isinstance(item, SSEEvent)
        if item.data is not None:
            self._check_data(item.data)
        if item.fields:
            old_error = item.field("error")
            if old_error is not None:
                raise stream_error(old_error, self._endpoint)
        return item

    def _check_data(self, data: str) -> None:
        if data == "[DONE]":
            self._done = True
            self._items = []
            self._next = 0
            raise StopAsyncIteration
        if data.startswith('{"error"'):
            raise stream_error(data, self._endpoint)

    async def receive_data(self) -> list[str]:
        """The data of the events the next read completed, in order (never empty),
        or [] once ``data: [DONE]`` ended the stream.

        An event without a ``data`` line is skipped.  Errors are raised as by
        iteration, once the events before them were returned."""
        while True:
            while self._next >= len(self._items):
                if self._done:
                    return []
                await self._receive_more()
            items = self._items
            if self._plain:  # every item is the data of a plain event
                out = items if self._next == 0 else items[self._next :]
                self._items = []
                self._next = 0
                return out  # type: ignore[return-value]
            data: list[str] = []
            while self._next < len(items):
                try:
                    event = await self.__anext__()  # holds: it does not read here
                except StopAsyncIteration:
                    return data
                except InferenceStreamError:
                    if data:
                        self._next -= 1  # raised by the next call
                        return data
                    raise
                if event.data is not None:
                    data.append(event.data)
            if data:
                return data

    async def _receive_more(self) -> None:
        conn = self._conn
        if conn is None:
            raise RuntimeError("use `async with` before iterating")
        if self._got_first:
            idle_s = self._timeouts.idle_s
            deadline = self._total_deadline
            if idle_s is not None:
                deadline = min(deadline, trio.current_time() + idle_s)
        else:
            deadline = min(self._total_deadline, self._first_deadline)
        chunked = self._chunked
        data: bytes | None
        with trio.CancelScope(deadline=deadline) as scope:
            if chunked is None:
                data = await conn.receive_body_data()
            elif chunked.done:
                data = None
            else:
                data = await conn.receive_raw_body()
        if scope.cancelled_caught:
            raise self._which_timeout()
        if data is None:
            partial = self._parser.close()
            what = "inside an event" if partial else "without data: [DONE]"
            raise InferenceClosed(
                f"the inference server at {self._endpoint} ended the answer {what}"
            )
        try:
            if chunked is None:
                items = items_of(self._parser.feed(data))
                plain = self._parser.last_plain
            elif not data:
                raise InferenceClosed(
                    f"the inference server at {self._endpoint} closed the connection"
                    " before the answer was complete"
                )
            else:
                items = chunked.feed(data)
                plain = chunked.plain
        except SSEError as exc:
            raise InferenceProtocolError(
                f"the inference server at {self._endpoint} sent a bad event stream: {exc}"
            ) from exc
        except ChunkedError as exc:
            raise InferenceProtocolError(
                f"the inference server at {self._endpoint} sent a bad chunked body: {exc}"
            ) from exc
        if items:
            self._got_first = True
            self._plain = plain
            self._items = items
            self._next = 0


def open_sse(
    endpoint: Endpoint,
    target: str,
    body: bytes,
    *,
    timeouts: Timeouts,
    method: str = "POST",
    headers: Sequence[tuple[str | bytes, str | bytes]] = (),
) -> SSEStream:
    """A streamed request; use as ``async with open_sse(...) as stream``."""
    return SSEStream(endpoint, method, target, body, timeouts=timeouts, headers=headers)
