"""Decoding llama-server's answers into typed values (06-loopd).  Pure: no I/O, no trio.

`decode_props`, `decode_slots`, `decode_slot_action` read the small answers;
`decode_chunk` reads one streamed chat chunk into deltas, and `ChatAssembler`
folds the deltas of one answer into text, tool calls (assembled by index),
the finish reason, usage and timings.

Strictness: llama-server's answers carry many fields and gain new ones with
every release.  Fields loopd uses are checked strictly (type, range, presence
where needed); every other field is ignored.  A used field that is missing or
of the wrong type is an `InferenceProtocolError`.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..proto._errors import DecodeError
from ..proto._json import loads_object, loads_value, type_word
from ._error_answers import stream_error
from ._errors import InferenceProtocolError, shown
from ._llama_api import (
    ChatDelta,
    ChatResult,
    FinishDelta,
    PartialToolCall,
    Props,
    SlotAction,
    SlotActionResult,
    SlotInfo,
    TextDelta,
    Timings,
    TimingsDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageDelta,
)


def _bad(where: str, message: str) -> InferenceProtocolError:
    return InferenceProtocolError(
        f"the inference server's answer is not as expected: {where}: {message}"
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


def describe_props(props: Props) -> str:
    """One line for a terminal (server text escaped)."""
    caps = {True: "yes", False: "no", None: "not reported"}[props.supports_tool_calls]
    model = shown(props.model, 80) if props.model else "unknown"
    return (f"model {model}, {props.total_slots} slots, n_ctx {props.n_ctx} per slot,"
            f" tool calls: {caps}")
