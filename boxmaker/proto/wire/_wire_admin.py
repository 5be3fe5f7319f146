"""admin.sock messages (02-wire): the owner's requests to brokerd, one per connection.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

from .._convert import U64, JsonObject, omit_when_none
from .._taint import Label, Taint
from ._wire import (
    ErrorAnswer,
    Ok,
    check_hex64,
    check_name,
    check_optional_name,
    check_tool,
    check_ts,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    tag_of,
    tag_table,
)
from ._wire_mcp import MCP_ANSWER_TAGS, MCP_REQUEST_TAGS, McpAnswer, McpRequestBody
from ._wire_passkey import (
    PASSKEY_ANSWER_TAGS,
    PASSKEY_REQUEST_TAGS,
    Assertion,
    PasskeyAnswer,
    PasskeyRequestBody,
    check_b64url,
)

# --- requests -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ApprovalsRequest:
    """``{"approvals": {}}``: every pending approval, oldest first."""


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """``{"approval": {"approval_id": N}}``: one pending approval, whole."""

    approval_id: U64


@attrs.frozen(kw_only=True)
class ApproveRequest:
    approval_id: U64
    assertion: Assertion | None = None
    """A WebAuthn assertion over the approval's `challenge` (11-approvals-web)."""


@attrs.frozen(kw_only=True)
class RefuseRequest:
    approval_id: U64
    reason: str | None


@attrs.frozen(kw_only=True)
class StatusRequest:
    """``{"status": {}}``."""


@attrs.frozen(kw_only=True)
class GrantsCheckRequest:
    """``{"grants_check": {}}``."""


@attrs.frozen(kw_only=True)
class SessionRequest:
    session: str = attrs.field(validator=check_name)


@attrs.frozen(kw_only=True)
class DeclassifyRequest:
    """Lower a session's taint (never raise it: error ``not_lower``)."""

    session: str = attrs.field(validator=check_name)
    label: Label
    untrusted: bool
    reason: str
    assertion: Assertion | None = None
    """Over `declassify_challenge` of this request (needed under require_passkey)."""


# The assertion is optional on the wire: a request without one is written as before.
omit_when_none(ApproveRequest, "assertion")
omit_when_none(DeclassifyRequest, "assertion")

AdminRequestBody = (
    ApprovalsRequest
    | ApprovalRequest
    | ApproveRequest
    | RefuseRequest
    | StatusRequest
    | GrantsCheckRequest
    | SessionRequest
    | DeclassifyRequest
    | PasskeyRequestBody
    | McpRequestBody
)


@attrs.frozen(kw_only=True)
class AdminRequest:
    """A decoded admin.sock request frame."""

    id: int
    """The client's u64 request id (checked when encoded and decoded)."""
    body: AdminRequestBody


# --- answers ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Approval:
    """A call waiting for the owner, shown whole (never truncated)."""

    approval_id: U64
    call: U64
    session: str = attrs.field(validator=check_name)
    tool: str = attrs.field(validator=check_tool)
    args: JsonObject
    grant: str = attrs.field(validator=check_name)
    state: Taint
    requested_at: str = attrs.field(validator=check_ts)
    expires_at: str = attrs.field(validator=check_ts)
    challenge: str = attrs.field(validator=check_b64url)
    """base64url SHA-256 of exactly this call and a nonce: what a passkey signs."""


@attrs.frozen(kw_only=True)
class ApprovalList:
    """``{"approvals": {"items": [...]}}``, oldest first."""

    items: list[Approval]


@attrs.frozen(kw_only=True)
class AuditStatus:
    ok: bool
    head_seq: U64
    head_hash: str = attrs.field(validator=check_hex64)


@attrs.frozen(kw_only=True)
class GrantsStatus:
    ok: bool
    count: U64
    digest: str = attrs.field(validator=check_hex64)


@attrs.frozen(kw_only=True)
class SourcesStatus:
    """The MCP tool sources (12-tool-sources): the set's validity and digest, and how
    many declared servers are pinned and unpinned."""

    ok: bool
    count: U64
    digest: str = attrs.field(validator=check_hex64)
    pinned: U64
    unpinned: U64


RunnerKind = Literal["podman", "refusing", "echo"]


@attrs.frozen(kw_only=True)
class RunnerStatus:
    kind: RunnerKind
    ok: bool
    image: str | None
    reason: str | None


@attrs.frozen(kw_only=True)
class WitnessStatus:
    """One configured witness (10-checkpoints): its newest cosigned size and when."""

    url: str
    name: str
    size: U64 | None
    cosigned_at: str | None
    reason: str | None
    """Why the last push failed (None after a cosignature)."""


@attrs.frozen(kw_only=True)
class CheckpointsStatus:
    size: U64 | None
    """The newest signed checkpoint's tree size (None before the first)."""
    signed_at: str | None
    witnesses: list[WitnessStatus]


@attrs.frozen(kw_only=True)
class Status:
    """brokerd's status (``bxctl status``)."""

    version: str
    audit: AuditStatus
    grants: GrantsStatus
    pending: U64
    sessions: U64
    runner: RunnerStatus
    warnings: list[str]
    checkpoints: CheckpointsStatus
    sources: SourcesStatus


GrantRule = Literal[
    "G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8", "G9", "G10",
    "G17", "G18", "G19", "G20", "G21", "G22",
]
"""G17..G22: run_command's (12-tool-sources)."""


@attrs.frozen(kw_only=True)
class GrantProblem:
    """One problem of a grant set (03-policy "Rules"); `index` None: the whole file."""

    file: str
    index: U64 | None
    grant: str | None = attrs.field(validator=check_optional_name)
    rule: GrantRule
    message: str


DormantRule = Literal["G11", "G12", "G13", "G14", "S13", "S16", "S17"]


@attrs.frozen(kw_only=True)
class DormantGrant:
    """A valid grant that matches nothing against the sources and pins (12-tool-sources
    "Grants for tool-source tools"); `rule` None: the tool is simply not there."""

    file: str
    index: U64
    grant: str = attrs.field(validator=check_name)
    rule: DormantRule | None
    reason: str


@attrs.frozen(kw_only=True)
class GrantsReport:
    ok: bool
    count: U64
    digest: str = attrs.field(validator=check_hex64)
    problems: list[GrantProblem]
    dormant: list[DormantGrant] | None = None
    """Left out by a brokerd without tool sources (issue 26)."""


omit_when_none(GrantsReport, "dormant")


@attrs.frozen(kw_only=True)
class SessionInfo:
    """A session's taint and the audit seq it was last changed at."""

    session: str = attrs.field(validator=check_name)
    label: Label
    untrusted: bool
    seq: U64


AdminAnswer = (
    ApprovalList | Approval | Ok | Status | GrantsReport | SessionInfo | PasskeyAnswer
    | McpAnswer | ErrorAnswer
)

ADMIN_REQUEST_TAGS: Final[dict[str, Any]] = {
    "approvals": ApprovalsRequest,
    "approval": ApprovalRequest,
    "approve": ApproveRequest,
    "refuse": RefuseRequest,
    "status": StatusRequest,
    "grants_check": GrantsCheckRequest,
    "session": SessionRequest,
    "declassify": DeclassifyRequest,
    **PASSKEY_REQUEST_TAGS,
    **MCP_REQUEST_TAGS,
}
ADMIN_ANSWER_TAGS: Final[dict[str, Any]] = {
    "approvals": ApprovalList,
    "approval": Approval,
    "ok": Ok,
    "status": Status,
    "grants_report": GrantsReport,
    "session": SessionInfo,
    **PASSKEY_ANSWER_TAGS,
    **MCP_ANSWER_TAGS,
    "error": ErrorAnswer,
}
_REQUEST_BY_CLASS = tag_table(ADMIN_REQUEST_TAGS)
_ANSWER_BY_CLASS = tag_table(ADMIN_ANSWER_TAGS)


def decode_admin_request(body: bytes | str) -> AdminRequest:
    """An admin.sock request frame body -> AdminRequest (DecodeError/BadVersion)."""
    request_id, _tag, message = decode_request(body, ADMIN_REQUEST_TAGS)
    return AdminRequest(id=request_id, body=message)


def encode_admin_request(request: AdminRequest) -> bytes:
    tag, cls = tag_of(_REQUEST_BY_CLASS, request.body)
    return encode_request(request.id, tag, request.body, cls)


def encode_admin_answer(id: int | None, answer: AdminAnswer) -> bytes:
    """One answer frame body; `id` may be None only for an ErrorAnswer."""
    tag, cls = tag_of(_ANSWER_BY_CLASS, answer)
    return encode_response(id, tag, answer, cls)


def decode_admin_answer(body: bytes | str) -> tuple[int | None, AdminAnswer]:
    """An answer frame body -> (id, answer); id is None only for an error."""
    answer_id, _tag, answer = decode_response(body, ADMIN_ANSWER_TAGS)
    return answer_id, answer
