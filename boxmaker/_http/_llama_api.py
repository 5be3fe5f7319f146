"""llama-server's API as loopd uses it (06-loopd), as values: the typed answers and the
chat request body.  Pure: no I/O, no trio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import attrs

from ..proto._json import dumps_bytes

CHAT_PATH: Final = "/v1/chat/completions"
SlotAction = Literal["save", "restore", "erase"]


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
