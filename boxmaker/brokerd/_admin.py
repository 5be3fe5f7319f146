"""admin.sock: the owner's requests, one per connection (02-wire "admin.sock").

approvals, approval, approve, refuse, status, grants_check, session,
declassify; the passkey requests (`_admin_passkey`) and the MCP ones
(`_admin_mcp`).  `approve`/`refuse` take the entry out of the pending table and
answer it in the same ledger step: of two at once, exactly one gets `ok`.

The handlers raise; `handle_admin` is the one place a raised `BoxmakerError`
becomes its `error` answer (its class's wire code, `answer_of`).
"""

from __future__ import annotations

import contextlib
import logging

import trio

from .._brokerd_config import commands_path
from .._error_table import shown
from .._errors import BoxmakerError
from .._sockets._streams import send_frame
from .._sockets._unix import PeerCred
from ..policy._load import GrantsMissing, load_grants, missing_state
from ..policy._mcp_dormant import dormant_grants
from ..policy._mcp_verdict import McpRegistry
from ..policy._model import GrantSet, GrantState
from ..proto._convert import U64, JsonObject
from ..proto._taint import Taint
from ..proto.wire import (
    MCP_REQUEST_TAGS,
    PASSKEY_REQUEST_TAGS,
    AdminAnswer,
    AdminRequest,
    Approval,
    ApprovalList,
    ApprovalRequest,
    ApprovalsRequest,
    ApproveRequest,
    AuditStatus,
    CheckpointsStatus,
    DeclassifyRequest,
    DormantGrant,
    GrantProblem,
    GrantsCheckRequest,
    GrantsReport,
    GrantsStatus,
    McpPinLinkRequest,
    McpPinOptionsRequest,
    Ok,
    RefuseRequest,
    RunnerStatus,
    SessionInfo,
    SessionRequest,
    SourcesStatus,
    Status,
    StatusRequest,
    answer_of,
    b64url,
    encode_admin_answer,
)
from ._admin_mcp import handle_mcp
from ._admin_mcp_link import handle_pin_link
from ._admin_passkey import approval_passkey, declassify_passkey, handle_passkey
from ._approvals import PendingApproval
from ._context import Daemon
from ._ledger import no_such_approval, no_such_session
from ._tool_sources import EMPTY_SOURCES_DIGEST
from .log._audit_writer import AuditUnavailable

log = logging.getLogger("brokerd")


def approval_view(entry: PendingApproval) -> Approval:
    return Approval(
        approval_id=U64(entry.approval_id), call=U64(entry.call_id), session=entry.session,
        tool=entry.tool, args=JsonObject(entry.args), grant=entry.grant or "",
        state=entry.state, requested_at=entry.requested_at, expires_at=entry.expires_at,
        challenge=b64url(entry.challenge),
    )


def grants_report(state: GrantState, registry: McpRegistry | None = None) -> GrantsReport:
    """The grants report; with a tool registry (brokerd has tool sources) its
    `dormant` grants too (12-tool-sources)."""
    report = state.report
    dormant = None if registry is None else [
        DormantGrant(file=d.file, index=U64(d.index), grant=d.grant, rule=d.rule,
                     reason=d.reason)
        for d in (dormant_grants(state, registry) if isinstance(state, GrantSet) else [])]
    return GrantsReport(
        ok=report.ok, count=U64(report.count), digest=report.digest,
        problems=[
            GrantProblem(file=p.file, index=U64(p.index) if p.index is not None else None,
                         grant=p.grant, rule=p.rule, message=p.message)
            for p in report.problems
        ],
        dormant=dormant,
    )


def runtime_image(runtime: object) -> str | None:
    """The tools image a podman runtime uses (None for the others)."""
    settings = getattr(runtime, "settings", None)
    image = getattr(settings, "image", None)
    return image if isinstance(image, str) else None


def status_of(daemon: Daemon) -> Status:
    writer = daemon.ledger.writer
    grants = daemon.watcher.state
    runtime = daemon.runtimes.main
    head = daemon.ledger.head_seq
    return Status(
        version=daemon.version,
        audit=AuditStatus(ok=writer.failure is None, head_seq=U64(head if head is not None else 0),
                          head_hash=writer.head_hash),
        grants=GrantsStatus(ok=grants.ok, count=U64(grants.report.count), digest=grants.digest),
        pending=U64(len(daemon.ledger.pending)),
        sessions=U64(daemon.ledger.session_count()),
        runner=RunnerStatus(kind=runtime.kind, ok=bool(runtime.ok),
                            image=runtime_image(runtime),
                            reason=None if runtime.ok else runtime.reason),
        warnings=list(daemon.warnings)
        + ([f"the audit log is unavailable: {shown(str(writer.failure), writer.failure)}"]
           if writer.failure else []),
        checkpoints=CheckpointsStatus(size=None, signed_at=None, witnesses=[])
        if daemon.checkpoints is None else daemon.checkpoints.status(daemon.format_time),
        sources=sources_status(daemon),
    )


def sources_status(daemon: Daemon) -> SourcesStatus:
    """`Status.sources` (12-tool-sources)."""
    if daemon.sources is None:
        return SourcesStatus(ok=True, count=U64(0), digest=EMPTY_SOURCES_DIGEST,
                             pinned=U64(0), unpinned=U64(0))
    summary = daemon.sources.summary()
    return SourcesStatus(ok=summary.ok, count=U64(summary.count), digest=summary.digest,
                         pinned=U64(summary.pinned), unpinned=U64(summary.unpinned))


async def handle_admin(stream: trio.abc.Stream, peer: PeerCred, daemon: Daemon,
                       request: AdminRequest) -> None:
    """Serve one decoded admin.sock request (the shell checked the peer and the frame).

    A `BoxmakerError` a handler raises is answered here, with its class's code;
    one answered on no socket propagates (the shell logs it and closes).
    """
    try:
        answer = await _dispatch(request, peer, daemon)
    except BoxmakerError as exc:
        error = answer_of(exc)
        if error is None:
            raise
        answer = error
    await send_frame(stream, encode_admin_answer(request.id, answer))


async def _dispatch(request: AdminRequest, peer: PeerCred, daemon: Daemon) -> AdminAnswer:
    body = request.body
    ledger = daemon.ledger
    if isinstance(body, ApprovalsRequest):
        return ApprovalList(items=[approval_view(e) for e in ledger.pending.items()])
    if isinstance(body, ApprovalRequest):
        entry = ledger.pending.get(body.approval_id)
        if entry is None:
            raise no_such_approval(body.approval_id)
        return approval_view(entry)
    if isinstance(body, (ApproveRequest, RefuseRequest)):
        return await _answer(body, peer, daemon)
    if isinstance(body, StatusRequest):
        # Status shows the grant set as it is now; a change it notices is recorded here.
        _, leading = daemon.refresh_grants()
        if leading:
            with contextlib.suppress(AuditUnavailable):  # status says the log is unavailable
                await ledger.record(leading)
        return status_of(daemon)
    if isinstance(body, GrantsCheckRequest):
        try:
            state: GrantState = load_grants(daemon.config.grants,
                                             commands_path=commands_path(daemon.config))
        except GrantsMissing:
            state = missing_state()
        return grants_report(state, None if daemon.sources is None
                             else daemon.sources.registry())
    if isinstance(body, SessionRequest):
        view = ledger.session_view(body.session)
        if view is None:
            raise no_such_session(body.session)
        taint, seq = view
        return SessionInfo(session=body.session, label=taint.label, untrusted=taint.untrusted,
                           seq=U64(seq))
    if isinstance(body, DeclassifyRequest):
        return await _declassify(body, peer, daemon)
    if isinstance(body, _PASSKEY_REQUESTS):
        return await handle_passkey(body, peer, daemon)
    if isinstance(body, (McpPinLinkRequest, McpPinOptionsRequest)):
        return await handle_pin_link(body, peer, daemon)
    if isinstance(body, _MCP_REQUESTS):
        return await handle_mcp(body, peer, daemon)
    raise AssertionError(f"unhandled admin request {type(body).__name__}")  # pragma: no cover


_PASSKEY_REQUESTS = tuple(PASSKEY_REQUEST_TAGS.values())
_MCP_REQUESTS = tuple(MCP_REQUEST_TAGS.values())


async def _answer(body: ApproveRequest | RefuseRequest, peer: PeerCred,
                  daemon: Daemon) -> AdminAnswer:
    _, leading = daemon.refresh_grants()
    if leading:
        await daemon.ledger.record(leading)
    passkey = None
    if isinstance(body, ApproveRequest):
        passkey = await approval_passkey(body, peer, daemon)
    refuse = isinstance(body, RefuseRequest)
    verdict = "refused" if refuse else "approved"
    await daemon.ledger.answer(
        body.approval_id, daemon.watcher.state, by=peer.uid, refuse=refuse,
        refused=body.reason if isinstance(body, RefuseRequest) else None, passkey=passkey)
    log.info("approval %d %s by uid %d", body.approval_id, verdict, peer.uid)
    return Ok()


async def _declassify(body: DeclassifyRequest, peer: PeerCred, daemon: Daemon) -> AdminAnswer:
    await declassify_passkey(body, peer, daemon)
    to = Taint(label=body.label, untrusted=body.untrusted)
    await daemon.ledger.declassify(body.session, to=to, by=peer.uid, reason=body.reason)
    return Ok()
