"""The llama-server client (06-loopd): the thin trio layer over `_fetch` and `_sse_stream`.

`LlamaClient`: health, the wait through "Loading model", props, slots, slot
save/restore/erase, and `chat`, a `ChatStream` of typed deltas.  All decoding
is `_llama_decode`'s.  ``GET /health`` gets `HEALTH_TIMEOUT_S` for its whole
answer: llama-server answers it at once, loading or not, so a server (or an
inferproxy in a socket's queue, restarting) that does not answer it in that
time is unavailable, said in seconds rather than after the 60 s of the others.
"""

from __future__ import annotations

import collections
from types import TracebackType
from typing import Final, Literal

import trio

from ..proto._json import dumps_bytes
from ._endpoint import Endpoint, HttpResponse, Timeouts
from ._error_answers import http_error
from ._errors import InferenceTimeout
from ._fetch import fetch
from ._llama_api import (
    CHAT_PATH,
    ChatDelta,
    ChatResult,
    Props,
    SlotAction,
    SlotActionResult,
    SlotInfo,
)
from ._llama_decode import (
    ChatAssembler,
    decode_chunk,
    decode_props,
    decode_slot_action,
    decode_slots,
)
from ._sse_stream import SSEStream, open_sse

HEALTH_TIMEOUT_S: Final = 10.0


class ChatStream:
    """``async with client.chat(body) as stream: async for delta in stream``.

    Yields each delta as soon as its event arrives; `assembler` holds what
    came so far, and `result()` the whole answer once the iteration ended.
    """

    def __init__(self, sse: SSEStream) -> None:
        self._sse = sse
        self._queue: collections.deque[ChatDelta] = collections.deque()
        self._ended = False
        self.assembler = ChatAssembler()

    async def __aenter__(self) -> ChatStream:
        await self._sse.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._sse.__aexit__(exc_type, exc, tb)

    @property
    def pings(self) -> int:
        return self._sse.pings

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> ChatDelta:
        while not self._queue:
            if self._ended:
                raise StopAsyncIteration
            # the data of every event one read completed (events with only other
            # fields are skipped; an error event raised once those before it came)
            batch = await self._sse.receive_data()
            if not batch:
                self._ended = True
                raise StopAsyncIteration
            for data in batch:
                for delta in decode_chunk(data):
                    self.assembler.add(delta)
                    self._queue.append(delta)
        return self._queue.popleft()

    def result(self) -> ChatResult:
        if not self._ended:
            raise RuntimeError("the stream has not ended yet")
        return self.assembler.result()


class LlamaClient:
    """llama-server (directly or through inferproxy) at `endpoint`."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeouts: Timeouts | None = None,
        request_timeout_s: float = 60.0,
    ) -> None:
        self.endpoint = endpoint
        self.timeouts = timeouts or Timeouts()
        self.request_timeout_s = request_timeout_s

    async def _get(self, target: str) -> HttpResponse:
        return await fetch(self.endpoint, "GET", target, timeout_s=self.request_timeout_s,
                           connect_timeout_s=self.timeouts.connect_s)

    def _check(self, response: HttpResponse) -> bytes:
        if response.status != 200:
            raise http_error(self.endpoint, response.head, response.body)
        return response.body

    async def health(self) -> Literal["ok", "loading"]:
        """One ``GET /health``: "ok", or "loading" for a 503 unavailable_error."""
        response = await fetch(self.endpoint, "GET", "/health",
                               timeout_s=min(HEALTH_TIMEOUT_S, self.request_timeout_s),
                               connect_timeout_s=self.timeouts.connect_s)
        if response.status == 200:
            return "ok"
        error = http_error(self.endpoint, response.head, response.body)
        if response.status == 503 and error.error_type == "unavailable_error":
            return "loading"
        raise error

    async def wait_until_ready(self, load_timeout_s: float, *, poll_s: float = 1.0) -> int:
        """Poll /health until 200, through 503 "Loading model", for up to
        `load_timeout_s`.  Returns how many answers were "loading"."""
        loading = 0
        with trio.move_on_after(load_timeout_s) as scope:
            while await self.health() == "loading":
                loading += 1
                await trio.sleep(poll_s)
            return loading
        assert scope.cancelled_caught
        raise InferenceTimeout(
            f"the inference server at {self.endpoint} was still loading its model after"
            f" {load_timeout_s} s",
            phase="total",
        )

    async def props(self) -> Props:
        return decode_props(self._check(await self._get("/props")))

    async def slots(self) -> list[SlotInfo]:
        return decode_slots(self._check(await self._get("/slots")))

    async def slot_action(self, slot: int, action: SlotAction, filename: str) -> SlotActionResult:
        """``POST /slots/{slot}?action=...`` with ``{"filename": ...}`` (not for erase)."""
        if type(slot) is not int or slot < 0:
            raise ValueError(f"bad slot {slot!r}")
        body = dumps_bytes({} if action == "erase" else {"filename": filename})
        response = await fetch(self.endpoint, "POST", f"/slots/{slot}?action={action}",
                               body=body, timeout_s=self.request_timeout_s,
                               connect_timeout_s=self.timeouts.connect_s)
        return decode_slot_action(action, self._check(response))

    async def save_slot(self, slot: int, filename: str) -> SlotActionResult:
        return await self.slot_action(slot, "save", filename)

    async def restore_slot(self, slot: int, filename: str) -> SlotActionResult:
        return await self.slot_action(slot, "restore", filename)

    async def erase_slot(self, slot: int) -> SlotActionResult:
        return await self.slot_action(slot, "erase", "")

    def chat(self, body: bytes, *, timeouts: Timeouts | None = None) -> ChatStream:
        """A streamed chat completion (`body` from `chat_request_body`)."""
        sse = open_sse(self.endpoint, CHAT_PATH, body, timeouts=timeouts or self.timeouts)
        return ChatStream(sse)
