"""admin.sock's MCP messages (12-tool-sources "Wire changes"): the owner's side of the
tool sources: the sources report, each server's state, a probe, a pin, an unpin
and the end of a cool-down.

`mcp_pin`'s `digest` and `invalidates` must equal the probe's (the owner
confirmed what they were shown); its `assertion` is over `proto.mcp`'s
`pin_challenge`.  `mcp_pin_link` asks for a one-time link to the approval page's
pin page (answered with passkey's `enrolment` shape); the page's `mcp_pin_options`
gets the probe as bxctl was shown it and the challenge to sign.  The probe's
`tools[].raw` is the Tool object as the server sent it (free-form JSON: escaped
wherever it is shown).  Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import attrs

from .._convert import U64, InvalidValue, JsonObject, omit_when_none
from ._wire import check_hex64, check_name, check_ts
from ._wire_passkey import Assertion, check_b64url, check_token

_SERVER_ID: Final = re.compile(r"[a-z][a-z0-9-]{0,30}")


def check_server(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    """A server id of 12's grammar; brokerd answers `no_such_server` for an undeclared one."""
    if _SERVER_ID.fullmatch(value) is None:
        raise InvalidValue(f"{attribute.name} is not of the grammar {_SERVER_ID.pattern}")


def check_optional_hex64(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        check_hex64(_, attribute, value)


# --- requests -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SourcesCheckRequest:
    """``{"sources_check": {}}``: the sources report (as `grants_check`)."""


@attrs.frozen(kw_only=True)
class McpStatusRequest:
    """``{"mcp_status": {}}``: every declared server's state; with the optional
    `server` (issue 26, `bxctl mcp show`) only that server's, with its `tools`."""

    server: str | None = attrs.field(default=None)

    @server.validator
    def _server(self, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None:
            check_server(self, attribute, value)


omit_when_none(McpStatusRequest, "server")


@attrs.frozen(kw_only=True)
class McpProbeRequest:
    """``{"mcp_probe": {"server"}}``: run the server once and show what a pin would hold."""

    server: str = attrs.field(validator=check_server)


@attrs.frozen(kw_only=True)
class Invalidated:
    """A grant a pin would make dormant or whose tool it would disable, with the rule
    (null: the tool is simply not offered any more)."""

    grant: str = attrs.field(validator=check_name)
    rule: str | None


@attrs.frozen(kw_only=True)
class McpPinRequest:
    server: str = attrs.field(validator=check_server)
    probe_id: U64
    digest: str = attrs.field(validator=check_hex64)
    invalidates: list[Invalidated]
    assertion: Assertion | None = None
    """Over `pin_challenge` of this request (needed under require_passkey)."""


@attrs.frozen(kw_only=True)
class McpUnpinRequest:
    server: str = attrs.field(validator=check_server)
    reason: str | None


@attrs.frozen(kw_only=True)
class McpRestartRequest:
    """``{"mcp_restart": {"server"}}``: end a cool-down."""

    server: str = attrs.field(validator=check_server)


@attrs.frozen(kw_only=True)
class McpPinLinkRequest:
    """``{"mcp_pin_link": {"server", "probe_id", "digest", "invalidates"}}``: a one-time link
    to the approval page, where the owner's passkey signs this probe's pin (the fields
    are `mcp_pin`'s: what the owner confirmed).  Answered with an `enrolment`."""

    server: str = attrs.field(validator=check_server)
    probe_id: U64
    digest: str = attrs.field(validator=check_hex64)
    invalidates: list[Invalidated]


@attrs.frozen(kw_only=True)
class McpPinOptionsRequest:
    """``{"mcp_pin_options": {"token"}}``: what the pin page shows and signs for a link."""

    token: str = attrs.field(validator=check_token)


omit_when_none(McpPinRequest, "assertion")

McpRequestBody = (SourcesCheckRequest | McpStatusRequest | McpProbeRequest | McpPinRequest
                  | McpUnpinRequest | McpRestartRequest | McpPinLinkRequest
                  | McpPinOptionsRequest)

# --- answers --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SourceProblemView:
    """One problem of the source set (12 "Rules"); `index` None: the whole file."""

    file: str
    index: U64 | None
    server: str | None
    rule: str
    message: str


@attrs.frozen(kw_only=True)
class SourcesReportView:
    """``{"sources_report": {"ok", "count", "digest", "problems"}}``."""

    ok: bool
    count: U64
    digest: str = attrs.field(validator=check_hex64)
    problems: list[SourceProblemView]


@attrs.frozen(kw_only=True)
class DisabledTool:
    tool: str
    rule: str
    message: str


ServerStateWord = Literal["pinned", "unpinned", "cooling_down"]


@attrs.frozen(kw_only=True)
class OfferedToolView:
    """One offered tool as the model sees it (broker.sock's `tools` item) and the
    argument grammar brokerd derives: `kinds` by dotted argument name, `egress`
    the declaration's word (``none``, ``server`` or ``arg:NAME``)."""

    name: str
    model_name: str
    description: str
    parameters: Any
    opaque: str | None
    """Why it is opaque (asked for or denied only), else null."""
    kinds: dict[str, str]
    egress: str


@attrs.frozen(kw_only=True)
class McpServerView:
    id: str = attrs.field(validator=check_server)
    state: ServerStateWord
    reason: str | None
    """Why unpinned (`none`, `unpinned`, `drifted`, `file_missing`, ...), else null."""
    pin: str | None = attrs.field(validator=check_optional_hex64)
    offered: U64
    disabled: list[DisabledTool]
    failures: U64
    tools: list[OfferedToolView] | None = None
    """Only when the request named the server: its offered tools, as the model sees them
    (empty when the model's list leaves the server out: too large for one frame)."""


omit_when_none(McpServerView, "tools")


@attrs.frozen(kw_only=True)
class McpStatusAnswer:
    """``{"mcp_status": {"servers": [...]}}``, in server id order."""

    servers: list[McpServerView]


@attrs.frozen(kw_only=True)
class FieldDiff:
    field: str
    change: Literal["added", "removed", "changed"]


@attrs.frozen(kw_only=True)
class ServerInfoView:
    name: str
    version: str


@attrs.frozen(kw_only=True)
class ProbedTool:
    name: str
    sha256: str = attrs.field(validator=check_hex64)
    raw: JsonObject
    status: Literal["same", "changed", "added", "removed"]
    diff: list[FieldDiff]
    opaque: str | None
    disabled: str | None
    suggested_kinds: dict[str, str]


@attrs.frozen(kw_only=True)
class McpProbeAnswer:
    """What a pin of the live list would hold, against the current pin."""

    probe_id: U64
    server: str = attrs.field(validator=check_server)
    protocol: str
    digest: str = attrs.field(validator=check_hex64)
    pinned: str | None = attrs.field(validator=check_optional_hex64)
    server_info: ServerInfoView | None
    tools: list[ProbedTool]
    invalidates: list[Invalidated]


@attrs.frozen(kw_only=True)
class McpPinOptions:
    """``{"mcp_pin_options": {...}}``: the probe of a pin link, whole, as `mcp_probe`
    answered it, and what the browser signs: `pin_challenge` of its `mcp_pin`."""

    probe: McpProbeAnswer
    challenge: str = attrs.field(validator=check_b64url)
    rp_id: str
    allow_credentials: list[str]
    """base64url ids of the enrolled credentials."""
    expires_at: str = attrs.field(validator=check_ts)
    """When the probe (and so the link) is no longer held."""


McpAnswer = SourcesReportView | McpStatusAnswer | McpProbeAnswer | McpPinOptions

MCP_REQUEST_TAGS: Final[dict[str, Any]] = {
    "sources_check": SourcesCheckRequest,
    "mcp_status": McpStatusRequest,
    "mcp_probe": McpProbeRequest,
    "mcp_pin": McpPinRequest,
    "mcp_unpin": McpUnpinRequest,
    "mcp_restart": McpRestartRequest,
    "mcp_pin_link": McpPinLinkRequest,
    "mcp_pin_options": McpPinOptionsRequest,
}
MCP_ANSWER_TAGS: Final[dict[str, Any]] = {
    "sources_report": SourcesReportView,
    "mcp_status": McpStatusAnswer,
    "mcp_probe": McpProbeAnswer,
    "mcp_pin_options": McpPinOptions,
}
