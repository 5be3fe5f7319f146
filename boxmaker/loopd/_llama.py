"""The llama-server API as loopd uses it (06-loopd), on top of `_http`.

Pure part (no I/O): decoding `/props`, `/slots`, slot actions and streamed
chat chunks into typed values, and `ChatAssembler`, which folds the deltas of
one answer into text, tool calls (assembled by index), the finish reason,
usage and timings.

I/O part: `LlamaClient` (health, the wait through "Loading model", props,
slots, slot save/restore/erase, `chat` streaming typed deltas).

Strictness: llama-server's answers carry many fields and gain new ones with
every release.  Fields loopd uses are checked strictly (type, range, presence
where needed); every other field is ignored.  A used field that is missing or
of the wrong type is an `InferenceProtocolError`.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final, Literal

import attrs
import trio

from ..proto._errors import DecodeError
from ..proto._json import dumps_bytes, loads_object, loads_value, type_word
from ._http import (
    Endpoint,
    HttpResponse,
    InferenceProtocolError,
    InferenceTimeout,
    Timeouts,
    fetch,
    http_error,
    shown,
)
from ._sse_stream import SSEStream, open_sse, stream_error

CHAT_PATH: Final = "/v1/chat/completions"
SlotAction = Literal["save", "restore", "erase"]


# -- typed values ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Props:
    """What the self-test reads from ``GET /props``."""

    total_slots: int
    n_ctx: int  # default_generation_settings.n_ctx: the context of one slot
    supports_tool_calls: bool | None  # None: the server did not say (no chat_template_caps)
    model: str | None = None
    build_info: str | None = None


@attrs.frozen(kw_only=True)
class SlotInfo:
    id: int
    n_ctx: int
    is_processing: bool


@attrs.frozen(kw_only=True)
class SlotActionResult:
    id_slot: int
    filename: str | None
    tokens: int | None  # n_saved, n_restored or n_erased
    ms: float | None  # timings.save_ms / restore_ms


@attrs.frozen(kw_only=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int | None = None


@attrs.frozen(kw_only=True)
class Timings:
    cache_n: int
    prompt_n: int
    predicted_n: int
    prompt_ms: float | None = None
    predicted_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_per_second: float | None = None


@attrs.frozen(kw_only=True)
class TextDelta:
    text: str


@attrs.frozen(kw_only=True)
class ToolCallDelta:
    """A fragment of tool call `index`: id and name come once, arguments in pieces."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@attrs.frozen(kw_only=True)
class FinishDelta:
    reason: str  # "stop", "length", "tool_calls", ...


@attrs.frozen(kw_only=True)
class UsageDelta:
    usage: Usage


@attrs.frozen(kw_only=True)
class TimingsDelta:
    timings: Timings


ChatDelta = TextDelta | ToolCallDelta | FinishDelta | UsageDelta | TimingsDelta


@attrs.frozen(kw_only=True)
class ToolCall:
    index: int
    id: str
    name: str
    arguments: str  # the model's text, exactly as assembled: not necessarily JSON


@attrs.frozen(kw_only=True)
class PartialToolCall:
    """A tool call of an answer that did not finish: what had arrived."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@attrs.frozen(kw_only=True)
class ChatResult:
    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage | None
    timings: Timings | None


# -- strict reading of the fields used ---------------------------------------------------


def _bad(where: str, message: str) -> InferenceProtocolError:
    return InferenceProtocolError(
        f"the inference server's answer is not as expected: {where}: {message}"
        " docs/runbook.md#inference-unavailable"
    )


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(where, f"expected an object, found {type_word(value)}")
    return value


def _int(obj: dict[str, Any], key: str, where: str, *, minimum: int = 0) -> int:
    value = obj.get(key)
    if type(value) is not int:
        raise _bad(f"{where}.{key}", f"expected an integer, found {type_word(value)}")
    if value < minimum:
        raise _bad(f"{where}.{key}", f"expected at least {minimum}, found {value}")
    return value


def _opt_int(obj: dict[str, Any], key: str, where: str) -> int | None:
    return None if obj.get(key) is None else _int(obj, key, where)


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and type(value) is not str:
        raise _bad(f"{where}.{key}", f"expected a string, found {type_word(value)}")
    return value


def _opt_float(obj: dict[str, Any], key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) not in (int, float):
        raise _bad(f"{where}.{key}", f"expected a number, found {type_word(value)}")
    return float(value)


def _bool(obj: dict[str, Any], key: str, where: str) -> bool:
    value = obj.get(key)
    if type(value) is not bool:
        raise _bad(f"{where}.{key}", f"expected a boolean, found {type_word(value)}")
    return value


def _document(body: bytes, where: str) -> Any:
    try:
        return loads_value(body)
    except DecodeError as exc:
        raise _bad(where, f"not valid JSON ({exc})") from exc


def decode_props(body: bytes) -> Props:
    props = _object(_document(body, "/props"), "/props")
    settings = _object(props.get("default_generation_settings"),
                       "/props.default_generation_settings")
    caps = props.get("chat_template_caps")
    supports: bool | None = None
    if caps is not None:
        supports = _bool(_object(caps, "/props.chat_template_caps"), "supports_tool_calls",
                         "/props.chat_template_caps")
    model = props.get("model_alias") or props.get("model_path")
    build = props.get("build_info")
    return Props(
        total_slots=_int(props, "total_slots", "/props", minimum=1),
        n_ctx=_int(settings, "n_ctx", "/props.default_generation_settings", minimum=1),
        supports_tool_calls=supports,
        model=model if isinstance(model, str) else None,
        build_info=build if isinstance(build, str) else None,
    )


def decode_slots(body: bytes) -> list[SlotInfo]:
    slots = _document(body, "/slots")
    if not isinstance(slots, list):
        raise _bad("/slots", f"expected a list, found {type_word(slots)}")
    out = []
    for i, item in enumerate(slots):
        where = f"/slots[{i}]"
        slot = _object(item, where)
        out.append(SlotInfo(id=_int(slot, "id", where), n_ctx=_int(slot, "n_ctx", where),
                            is_processing=_bool(slot, "is_processing", where)))
    return out


def decode_slot_action(action: SlotAction, body: bytes) -> SlotActionResult:
    where = f"/slots?action={action}"
    answer = _object(_document(body, where), where)
    count_key = {"save": "n_saved", "restore": "n_restored", "erase": "n_erased"}[action]
    timings = answer.get("timings")
    ms = None
    if timings is not None:
        ms = _opt_float(_object(timings, f"{where}.timings"), f"{action}_ms", f"{where}.timings")
    return SlotActionResult(
        id_slot=_int(answer, "id_slot", where),
        filename=_opt_str(answer, "filename", where),
        tokens=_opt_int(answer, count_key, where),
        ms=ms,
    )


def decode_usage(value: Any, where: str = "usage") -> Usage:
    usage = _object(value, where)
    details = usage.get("prompt_tokens_details")
    cached = None
    if details is not None:
        cached = _opt_int(_object(details, f"{where}.prompt_tokens_details"), "cached_tokens",
                          f"{where}.prompt_tokens_details")
    return Usage(
        prompt_tokens=_int(usage, "prompt_tokens", where),
        completion_tokens=_int(usage, "completion_tokens", where),
        total_tokens=_int(usage, "total_tokens", where),
        cached_tokens=cached,
    )


def decode_timings(value: Any, where: str = "timings") -> Timings:
    t = _object(value, where)
    return Timings(
        cache_n=_int(t, "cache_n", where),
        prompt_n=_int(t, "prompt_n", where),
        predicted_n=_int(t, "predicted_n", where),
        prompt_ms=_opt_float(t, "prompt_ms", where),
        predicted_ms=_opt_float(t, "predicted_ms", where),
        prompt_per_second=_opt_float(t, "prompt_per_second", where),
        predicted_per_second=_opt_float(t, "predicted_per_second", where),
    )


def _tool_call_deltas(value: Any, where: str) -> list[ToolCallDelta]:
    if not isinstance(value, list):
        raise _bad(where, f"expected a list, found {type_word(value)}")
    out = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        call = _object(item, at)
        function = call.get("function")
        name = arguments = None
        if function is not None:
            fn = _object(function, f"{at}.function")
            name = _opt_str(fn, "name", f"{at}.function")
            arguments = _opt_str(fn, "arguments", f"{at}.function")
        out.append(ToolCallDelta(index=_int(call, "index", at), id=_opt_str(call, "id", at),
                                 name=name, arguments=arguments or ""))
    return out


def decode_chunk(data: str) -> list[ChatDelta]:
    """The deltas in one streamed ``chat.completion.chunk`` (a data line's JSON).

    An object with an ``error`` key raises `InferenceStreamError`.
    """
    try:
        chunk = loads_object(data)
    except DecodeError as exc:
        raise _bad("a streamed event", f"not a JSON object ({exc})") from exc
    if "error" in chunk:
        raise stream_error(data)
    deltas: list[ChatDelta] = []
    choices = chunk.get("choices", [])
    if not isinstance(choices, list):
        raise _bad("choices", f"expected a list, found {type_word(choices)}")
    for i, item in enumerate(choices):
        where = f"choices[{i}]"
        choice = _object(item, where)
        if _int(choice, "index", where) != 0:
            raise _bad(f"{where}.index", "only one choice (index 0) was asked for")
        delta = choice.get("delta")
        if delta is not None:
            delta = _object(delta, f"{where}.delta")
            content = _opt_str(delta, "content", f"{where}.delta")
            if content:
                deltas.append(TextDelta(text=content))
            if delta.get("tool_calls") is not None:
                deltas.extend(_tool_call_deltas(delta["tool_calls"], f"{where}.delta.tool_calls"))
        finish = _opt_str(choice, "finish_reason", where)
        if finish is not None:
            deltas.append(FinishDelta(reason=finish))
    if chunk.get("usage") is not None:
        deltas.append(UsageDelta(usage=decode_usage(chunk["usage"])))
    if chunk.get("timings") is not None:
        deltas.append(TimingsDelta(timings=decode_timings(chunk["timings"])))
    return deltas


@attrs.define
class _PartialCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = attrs.field(factory=list)


class ChatAssembler:
    """Folds the deltas of one answer into a `ChatResult` (pure)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._timings: Timings | None = None

    @property
    def text(self) -> str:
        """The text received so far (kept when an answer is interrupted)."""
        return "".join(self._text)

    def partial_tool_calls(self) -> tuple[PartialToolCall, ...]:
        """The tool calls received so far, by index, as they stand (maybe cut short)."""
        return tuple(
            PartialToolCall(index=i, id=c.id, name=c.name, arguments="".join(c.arguments))
            for i, c in sorted(self._calls.items())
        )

    def add(self, delta: ChatDelta) -> None:
        if isinstance(delta, TextDelta):
            self._text.append(delta.text)
        elif isinstance(delta, ToolCallDelta):
            call = self._calls.setdefault(delta.index, _PartialCall())
            where = f"tool call {delta.index}"
            if delta.id is not None:
                if call.id is not None and call.id != delta.id:
                    raise _bad(where, "a second, different id")
                call.id = delta.id
            if delta.name is not None:
                if call.name is not None and call.name != delta.name:
                    raise _bad(where, "a second, different function name")
                call.name = delta.name
            if delta.arguments:
                call.arguments.append(delta.arguments)
        elif isinstance(delta, FinishDelta):
            self._finish = delta.reason
        elif isinstance(delta, UsageDelta):
            self._usage = delta.usage
        else:
            self._timings = delta.timings

    def result(self) -> ChatResult:
        """The whole answer; call after the stream ended with [DONE]."""
        if self._finish is None:
            raise _bad("the answer", "it ended without a finish_reason")
        calls = []
        for index in sorted(self._calls):
            partial = self._calls[index]
            if partial.id is None or partial.name is None:
                raise _bad(f"tool call {index}", "no id or no function name")
            calls.append(ToolCall(index=index, id=partial.id, name=partial.name,
                                  arguments="".join(partial.arguments)))
        return ChatResult(text=self.text, tool_calls=tuple(calls), finish_reason=self._finish,
                          usage=self._usage, timings=self._timings)


def chat_request_body(
    messages: Sequence[dict[str, Any]],
    *,
    model: str,
    slot: int,
    temperature: float,
    tools: Sequence[dict[str, Any]] = (),
    max_tokens: int | None = None,
) -> bytes:
    """The JSON body of a streamed chat request as 06-loopd builds it."""
    body: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        "id_slot": slot,
        "cache_prompt": True,
        "temperature": temperature,
    }
    if tools:
        body["tools"] = list(tools)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return dumps_bytes(body)


# -- I/O ------------------------------------------------------------------------------------


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
            try:
                event = await self._sse.__anext__()
            except StopAsyncIteration:
                self._ended = True
                raise
            if event.data is None:
                continue  # an event with only other fields (not error: that raised)
            for delta in decode_chunk(event.data):
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
        response = await self._get("/health")
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
            f" {load_timeout_s} s docs/runbook.md#inference-unavailable",
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


def describe_props(props: Props) -> str:
    """One line for a terminal (server text escaped)."""
    caps = {True: "yes", False: "no", None: "not reported"}[props.supports_tool_calls]
    model = shown(props.model, 80) if props.model else "unknown"
    return (f"model {model}, {props.total_slots} slots, n_ctx {props.n_ctx} per slot,"
            f" tool calls: {caps}")

