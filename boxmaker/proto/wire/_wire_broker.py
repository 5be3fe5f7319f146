"""broker.sock messages (02-wire): one tool call per connection, loopd -> brokerd.

Request ``{"v":1,"id":N,"call":{...}}``; answers: zero or one ``pending``,
then exactly one of ``result``, ``denied``, ``error``.  Or (12-tool-sources)
``{"v":1,"id":N,"tools":{}}``, not recorded, answered ``tools``: the offered
tool-source tools as the model sees them.  Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

from .._convert import U64, InvalidValue, JsonObject
from .._taint import Label
from ._wire import (
    DenialCode,
    ErrorAnswer,
    check_name,
    check_optional_name,
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


@attrs.frozen(kw_only=True)
class Call:
    """The one request of broker.sock: a tool call of a session."""

    session: str = attrs.field(validator=check_name)
    tool: str = attrs.field(validator=check_tool)
    args: JsonObject


@attrs.frozen(kw_only=True)
class ToolsQuery:
    """``{"tools": {}}`` (12-tool-sources): the offered tool-source tools."""


@attrs.frozen(kw_only=True)
class BrokerRequest:
    """A decoded broker.sock request frame."""

    id: int
    """The client's u64 request id (checked when encoded and decoded)."""
    call: Call | ToolsQuery
    """The call, or the `tools` query."""


MAX_TOOL_ITEMS: Final = 65_536


@attrs.frozen(kw_only=True)
class ToolItem:
    """One offered tool: boxmaker's name, the model's name, what the model sees."""

    name: str = attrs.field(validator=check_tool)
    model_name: str
    description: str
    parameters: Any
    """The pinned inputSchema with local `$ref`s resolved (opaque: as pinned)."""
    opaque: bool


@attrs.frozen(kw_only=True)
class ToolsAnswer:
    """The offered tools, servers in id order, tools in local-name order; `digest`
    the SHA-256 of `items` in canonical form."""

    digest: str
    items: list[ToolItem] = attrs.field(validator=attrs.validators.max_len(MAX_TOOL_ITEMS))


@attrs.frozen(kw_only=True)
class Pending:
    """The call waits for the owner's approval until `expires_at`."""

    approval_id: U64
    expires_at: str = attrs.field(validator=check_ts)
    grant: str = attrs.field(validator=check_name)


ResultStatus = Literal["ok", "tool_failed", "timeout"]


def _check_tool_failure(output: dict[str, Any]) -> None:
    error = output.get("error")
    if (
        set(output) != {"error"}
        or type(error) is not dict
        or set(error) != {"code", "message"}
        or type(error["code"]) is not str
        or type(error["message"]) is not str
    ):
        raise InvalidValue('a tool_failed output is {"error": {"code": string, "message": string}}')


@attrs.frozen(kw_only=True)
class Result:
    """The tool ran: its output (``null`` on timeout) and the taint it brings."""

    status: ResultStatus
    output: JsonObject | None
    label: Label
    untrusted: bool

    def __attrs_post_init__(self) -> None:
        if self.status == "timeout":
            if self.output is not None:
                raise InvalidValue("output must be null when status is timeout")
        elif self.output is None:
            raise InvalidValue(f"output must be an object when status is {self.status}")
        elif self.status == "tool_failed":
            _check_tool_failure(self.output)


@attrs.frozen(kw_only=True)
class Denied:
    """The call was not run (and, for a denial, was recorded)."""

    code: DenialCode
    reason: str
    grant: str | None = attrs.field(validator=check_optional_name)
    runbook: str | None = attrs.field(validator=check_runbook)


BrokerAnswer = Pending | Result | Denied | ErrorAnswer | ToolsAnswer

BROKER_REQUEST_TAGS: Final[dict[str, Any]] = {"call": Call, "tools": ToolsQuery}
BROKER_ANSWER_TAGS: Final[dict[str, Any]] = {
    "pending": Pending,
    "result": Result,
    "denied": Denied,
    "error": ErrorAnswer,
    "tools": ToolsAnswer,
}
_ANSWER_BY_CLASS = tag_table(BROKER_ANSWER_TAGS)
_REQUEST_BY_CLASS = tag_table(BROKER_REQUEST_TAGS)


def decode_broker_request(body: bytes | str) -> BrokerRequest:
    """A broker.sock request frame body -> BrokerRequest (DecodeError/BadVersion)."""
    request_id, _tag, call = decode_request(body, BROKER_REQUEST_TAGS)
    return BrokerRequest(id=request_id, call=call)


def encode_broker_request(request: BrokerRequest) -> bytes:
    tag, cls = tag_of(_REQUEST_BY_CLASS, request.call)
    return encode_request(request.id, tag, request.call, cls)


def encode_broker_answer(id: int | None, answer: BrokerAnswer) -> bytes:
    """One answer frame body; `id` may be None only for an ErrorAnswer."""
    tag, cls = tag_of(_ANSWER_BY_CLASS, answer)
    return encode_response(id, tag, answer, cls)


def decode_broker_answer(body: bytes | str) -> tuple[int | None, BrokerAnswer]:
    """An answer frame body -> (id, answer); id is None only for an error."""
    answer_id, _tag, answer = decode_response(body, BROKER_ANSWER_TAGS)
    return answer_id, answer
