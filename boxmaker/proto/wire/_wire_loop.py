"""loop.sock messages (02-wire): bxctl -> loopd, and the frames of a turn.

A ``say`` is answered by a stream of ``event`` frames and one ``done`` or
``error``; ``status``, ``history`` and ``conversations`` by one frame.  Pure.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

from .._convert import U64, InvalidValue, JsonObject, omit_when_none, register_tagged_union
from .._json import dumps, nesting_depth
from .._taint import Label
from ._wire import (
    DenialCode,
    ErrorAnswer,
    check_name,
    check_runbook,
    check_tool,
    check_ts,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    tag_of,
    tag_table,
)
from ._wire_broker import ResultStatus

MAX_SAY_BYTES: Final = 64 * 1024
MAX_TEXT_DELTA_BYTES: Final = 64 * 1024
"""A `text` event carries at most this much UTF-8; loopd splits a longer delta."""
MAX_ARGS_DEPTH: Final = 32
"""How deep a `tool_call`'s `args` may nest (a flat object is 1).  The deepest
envelope that carries arguments (admin.sock's approval list) adds 4 levels to
them, so 32 keeps every frame far inside 02-wire's 64."""
MAX_ARGS_BYTES: Final = 2 * 1024 * 1024
"""The most UTF-8 JSON a `tool_call`'s `args` (or `raw_args` as a JSON string)
may take: room for the 1 MiB `write_file` content, and far inside a frame."""
MAX_RAW_ARGS_CHARS: Final = 64 * 1024
"""loopd cuts the model's text in `raw_args` to this many characters."""
MAX_CALL_ID_CHARS: Final = 256
"""loopd cuts the model's tool-call id in events to this many characters."""

# --- requests -------------------------------------------------------------------


def _check_say_text(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    size = len(value.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_SAY_BYTES:
        raise InvalidValue(f"{attribute.name} must be 1 to {MAX_SAY_BYTES} bytes of UTF-8")


@attrs.frozen(kw_only=True)
class SayRequest:
    """The owner says `text` in `conversation` (also the brokerd session id)."""

    conversation: str = attrs.field(validator=check_name)
    text: str = attrs.field(validator=_check_say_text)


@attrs.frozen(kw_only=True)
class LoopStatusRequest:
    """``{"status": {}}``."""


@attrs.frozen(kw_only=True)
class HistoryRequest:
    conversation: str = attrs.field(validator=check_name)


@attrs.frozen(kw_only=True)
class ConversationsRequest:
    """``{"conversations": {}}``."""


LoopRequestBody = SayRequest | LoopStatusRequest | HistoryRequest | ConversationsRequest


@attrs.frozen(kw_only=True)
class LoopRequest:
    """A decoded loop.sock request frame."""

    id: int
    """The client's u64 request id (checked when encoded and decoded)."""
    body: LoopRequestBody


# --- events of a turn -----------------------------------------------------------


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _check_delta(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if _utf8_size(value) > MAX_TEXT_DELTA_BYTES:
        raise InvalidValue(f"{attribute.name} is longer than {MAX_TEXT_DELTA_BYTES} bytes")


def _check_call_id(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if len(value) > MAX_CALL_ID_CHARS:
        raise InvalidValue(f"{attribute.name} is longer than {MAX_CALL_ID_CHARS} characters")


def args_problem(args: JsonObject | dict[str, Any]) -> str | None:
    """Why `args` cannot be forwarded in a `tool_call` event (None: it can)."""
    depth = nesting_depth(args)
    if depth > MAX_ARGS_DEPTH:
        return f"the arguments nest {depth} deep, more than {MAX_ARGS_DEPTH}"
    size = _utf8_size(dumps(args))
    if size > MAX_ARGS_BYTES:
        return f"the arguments take {size} bytes as JSON, more than {MAX_ARGS_BYTES}"
    return None


def _check_args(_: object, attribute: attrs.Attribute[Any], value: JsonObject | None) -> None:
    if value is not None:
        problem = args_problem(value)
        if problem is not None:
            raise InvalidValue(f"{attribute.name}: {problem}")


def _check_raw_args(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and _utf8_size(dumps(value)) > MAX_ARGS_BYTES:
        raise InvalidValue(f"{attribute.name} is longer than {MAX_ARGS_BYTES} bytes as JSON")


def split_text(text: str, limit: int = MAX_TEXT_DELTA_BYTES) -> list[str]:
    """`text` cut, between code points, into pieces of at most `limit` UTF-8 bytes."""
    if _utf8_size(text) <= limit:
        return [text]
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + limit)  # a code point is at least one byte
        while _utf8_size(text[start:end]) > limit:
            end = max(start + 1, start + (end - start) * 3 // 4)
        pieces.append(text[start:end])
        start = end
    return pieces


@attrs.frozen(kw_only=True)
class TextEvent:
    """One text delta, as received from the model (a long one split by loopd)."""

    delta: str = attrs.field(validator=_check_delta)


@attrs.frozen(kw_only=True)
class ToolCallEvent:
    """The model asked for a tool; `args` None (and `raw_args` its text) if not an object."""

    call_id: str = attrs.field(validator=_check_call_id)
    tool: str = attrs.field(validator=check_tool)
    args: JsonObject | None = attrs.field(validator=_check_args)
    raw_args: str | None = attrs.field(validator=_check_raw_args)

    def __attrs_post_init__(self) -> None:
        if (self.args is None) == (self.raw_args is None):
            raise InvalidValue("exactly one of args and raw_args is null")


@attrs.frozen(kw_only=True)
class ApprovalPendingEvent:
    call_id: str = attrs.field(validator=_check_call_id)
    approval_id: U64
    tool: str
    expires_at: str = attrs.field(validator=check_ts)


ToolDeniedCode = Literal[
    DenialCode, "runner_unavailable", "audit_unavailable", "broker_unavailable",
    "source_unavailable"
]


@attrs.frozen(kw_only=True)
class ToolDeniedEvent:
    call_id: str = attrs.field(validator=_check_call_id)
    tool: str
    code: ToolDeniedCode
    reason: str
    runbook: str | None = attrs.field(validator=check_runbook)


def _check_exit(_: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not 0 <= value <= 255):
        raise InvalidValue(f"{attribute.name}: an exit code, 0 to 255")


@attrs.frozen(kw_only=True)
class ToolResultEvent:
    call_id: str = attrs.field(validator=_check_call_id)
    tool: str
    status: ResultStatus
    bytes: U64
    label: Label
    untrusted: bool
    exit: int | None = attrs.field(default=None, validator=_check_exit)
    """A command's exit code (0..255; run_command, issue 25), left out otherwise."""


omit_when_none(ToolResultEvent, "exit")

MAX_NOTICE_CHARS: Final = 4096
"""A `notice` event's `text` is at most this many characters (loopd cuts the output)."""

NoticeKind = Literal["repeat", "cut_call", "result"]


def _check_notice_text(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not 1 <= len(value) <= MAX_NOTICE_CHARS:
        raise InvalidValue(f"{attribute.name}: 1 to {MAX_NOTICE_CHARS} characters")


@attrs.frozen(kw_only=True)
class NoticeEvent:
    """loopd's own word to the owner about the turn (issue 27), never the model's text.

    `repeat`: the model asked again for a call it had already made in this
    turn; it was not run again, the turn ends and `text` shows the earlier
    outcome (the tool's output is untrusted: a client escapes it).  `cut_call`:
    the model's tool call was cut off (the token limit, or the server could not
    parse it); nothing was run and the turn goes on.  `result`: the turn ended and
    the model's final words did not carry the result of its last successful call;
    `text` shows that result (untrusted, escaped by a client like a repeat's).
    """

    kind: NoticeKind
    call_id: str | None = attrs.field(
        validator=attrs.validators.optional(_check_call_id))
    tool: str | None = attrs.field(validator=attrs.validators.optional(check_tool))
    text: str = attrs.field(validator=_check_notice_text)


Event = (TextEvent | ToolCallEvent | ApprovalPendingEvent | ToolDeniedEvent | ToolResultEvent
         | NoticeEvent)
EVENT_TAGS: Final[dict[str, type]] = {
    "text": TextEvent,
    "tool_call": ToolCallEvent,
    "approval_pending": ApprovalPendingEvent,
    "tool_denied": ToolDeniedEvent,
    "tool_result": ToolResultEvent,
    "notice": NoticeEvent,
}
register_tagged_union(Event, EVENT_TAGS)

# --- final and single answers ----------------------------------------------------

Finish = Literal["stop", "length", "max_rounds", "repeat"]


@attrs.frozen(kw_only=True)
class Usage:
    prompt_tokens: U64
    completion_tokens: U64


@attrs.frozen(kw_only=True)
class Done:
    """The turn ended normally; `usage` summed over its rounds."""

    finish: Finish
    rounds: U64
    usage: Usage


@attrs.frozen(kw_only=True)
class InferenceStatus:
    ok: bool
    model: str
    n_ctx_per_slot: U64
    slots: U64
    slot: U64
    reason: str | None


@attrs.frozen(kw_only=True)
class BrokerLinkStatus:
    ok: bool
    reason: str | None


MAX_MCP_TOOLS: Final = 65_536


@attrs.frozen(kw_only=True)
class McpToolShown:
    """A tool-source tool loopd offers (12-tool-sources), as the chat's banner and
    `/help` name it: boxmaker's name, the model's, and the description the model reads
    (the server's or the owner's text: escaped wherever it is shown)."""

    name: str = attrs.field(validator=check_tool)
    model_name: str = attrs.field(validator=check_tool)
    description: str


@attrs.frozen(kw_only=True)
class LoopStatus:
    version: str
    busy: bool
    inference: InferenceStatus
    broker: BrokerLinkStatus
    mcp_tools: list[McpToolShown] | None = attrs.field(
        default=None, validator=attrs.validators.optional(
            attrs.validators.max_len(MAX_MCP_TOOLS)))
    """The tool-source tools a turn started now would offer (brokerd's `tools` answer,
    the items `[loop] tools` names); left out when `[loop] tools` names none or the
    query failed (issue 26; docs/decisions.md)."""


omit_when_none(LoopStatus, "mcp_tools")


Role = Literal["system", "user", "assistant", "tool"]


@attrs.frozen(kw_only=True)
class FunctionCall:
    """OpenAI's ``function`` of a tool call; `arguments` is the model's text."""

    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class MessageToolCall:
    """One entry of an assistant message's ``tool_calls`` (OpenAI shape)."""

    id: str
    type: Literal["function"]
    function: FunctionCall


@attrs.frozen(kw_only=True)
class HistoryMessage:
    """A chat message in OpenAI's shape plus its time, every field present.

    system/user: `content` a string, `tool_calls` and `tool_call_id` null.
    assistant: `content` a string or null, `tool_calls` null or a non-empty
    list, `tool_call_id` null; `interrupted` when the turn was cut short and
    the message kept as received.  tool: `content` a string and
    `tool_call_id` the call it answers.  (docs/decisions.md, "loop.sock history")
    """

    role: Role
    content: str | None
    tool_calls: list[MessageToolCall] | None
    tool_call_id: str | None
    interrupted: bool
    ts: str = attrs.field(validator=check_ts)

    def __attrs_post_init__(self) -> None:
        if self.role != "assistant" and self.tool_calls is not None:
            raise InvalidValue(f"tool_calls must be null in a {self.role} message")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise InvalidValue("tool_call_id is set in tool messages and only there")
        if self.role == "assistant":
            if self.tool_calls is not None and not self.tool_calls:
                raise InvalidValue("tool_calls is null or a non-empty list")
        elif self.content is None:
            raise InvalidValue(f"content must be a string in a {self.role} message")


@attrs.frozen(kw_only=True)
class History:
    messages: list[HistoryMessage]


@attrs.frozen(kw_only=True)
class ConversationSummary:
    name: str = attrs.field(validator=check_name)
    messages: U64
    updated_at: str = attrs.field(validator=check_ts)


@attrs.frozen(kw_only=True)
class Conversations:
    items: list[ConversationSummary]


LoopFrame = (
    TextEvent
    | NoticeEvent
    | ToolCallEvent
    | ApprovalPendingEvent
    | ToolDeniedEvent
    | ToolResultEvent
    | Done
    | ErrorAnswer
    | LoopStatus
    | History
    | Conversations
)

LOOP_REQUEST_TAGS: Final[dict[str, Any]] = {
    "say": SayRequest,
    "status": LoopStatusRequest,
    "history": HistoryRequest,
    "conversations": ConversationsRequest,
}
LOOP_FRAME_TAGS: Final[dict[str, Any]] = {
    "event": Event,
    "done": Done,
    "error": ErrorAnswer,
    "status": LoopStatus,
    "history": History,
    "conversations": Conversations,
}
_REQUEST_BY_CLASS = tag_table(LOOP_REQUEST_TAGS)
_FRAME_BY_CLASS = tag_table(LOOP_FRAME_TAGS)


def decode_loop_request(body: bytes | str) -> LoopRequest:
    """A loop.sock request frame body -> LoopRequest (DecodeError/BadVersion)."""
    request_id, _tag, message = decode_request(body, LOOP_REQUEST_TAGS)
    return LoopRequest(id=request_id, body=message)


def encode_loop_request(request: LoopRequest) -> bytes:
    tag, cls = tag_of(_REQUEST_BY_CLASS, request.body)
    return encode_request(request.id, tag, request.body, cls)


def encode_loop_frame(id: int | None, frame: LoopFrame) -> bytes:
    """One frame body; an event class is wrapped as ``{"event": {<kind>: ...}}``."""
    tag, cls = tag_of(_FRAME_BY_CLASS, frame)
    return encode_response(id, tag, frame, cls)


def decode_loop_frame(body: bytes | str) -> tuple[int | None, LoopFrame]:
    """A frame body -> (id, frame); an event comes back as its event class."""
    frame_id, _tag, frame = decode_response(body, LOOP_FRAME_TAGS)
    return frame_id, frame
