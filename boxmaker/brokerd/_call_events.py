"""The events of one tool call in brokerd, and what a move of its table gives back
(05-brokerd "Handling one call"; the table is `_lifecycle.py`, as h11 keeps
`_events.py` beside `_state.py`).

The verdict is the policy's (`Decision | Ask`, issue 24 item 2); the replies
are broker.sock's answers themselves (`Pending`, `Denied`, `Result`, an
`ErrorAnswer`), plus `Run`.  Pure: no I/O, no trio, no clock.

The verdicts and the ticket are frozen; the events, steps and `Run`, made
afresh for every call and changed by nobody, are plain slotted attrs classes
(a frozen attrs init costs nearly twice as much, on every call's path).
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Final

import attrs

from .._error_table import condition
from ..policy._decision import Ask, Decision, refusal
from ..proto._convert import U64
from ..proto._json import canonical, dumps_bytes
from ..proto._taint import Taint
from ..proto.audit import Event, OmittedArgs, OutputDigest, PasskeyUse, ResultStatus
from ..proto.wire import DENIAL_RUNBOOKS, DenialCode, Denied, ErrorAnswer, Pending, Result

# -- verdicts: the policy's one shape, for its word and for brokerd's own denials


Verdict = Decision | Ask
"""What `decide` returns (`policy._decide`): an allowed or denied Decision, or an Ask.
brokerd's own denials are Decisions too (`policy._decision.refusal`)."""


MAX_REASON_BYTES = 4096
"""A denial reason may quote what the model sent (a tool name, a path); longer
ones are cut, with the whole text's length and hash, so no record grows with it."""


def bound_reason(text: str, limit: int = MAX_REASON_BYTES) -> str:
    """`text`, or its longest prefix of at most `limit` UTF-8 bytes plus a note."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", "ignore")
    return f"{head} [cut: {len(data)} bytes in all, sha256 {hashlib.sha256(data).hexdigest()}]"


def output_digest(output: dict[str, Any] | None) -> OutputDigest | None:
    """{sha256, bytes} of the answer's output, as it is sent (compact JSON)."""
    if output is None:
        return None
    data = dumps_bytes(output)
    return OutputDigest(sha256=hashlib.sha256(data).hexdigest(), bytes=U64(len(data)))


def exhausted(asked: Ask, why: str) -> Decision:
    """An ask with no approval id free: recorded and answered denied."""
    return refusal("approvals_exhausted", tool=asked.tool, state=asked.state,
                   grant=asked.grant, grants_digest=asked.grants_digest,
                   reason=f"no approval id is free ({why}); answer the pending "
                          f"approvals or wait. See {condition('approvals_exhausted')}")


def too_many_pending(asked: Ask, why: str) -> Decision:
    """An ask past `[approvals] max_pending` or `max_pending_per_session`: recorded
    and answered denied at once (issue 22 item 9)."""
    return refusal("too_many_pending", tool=asked.tool, state=asked.state,
                   grant=asked.grant, grants_digest=asked.grants_digest,
                   reason=f"{why}; answer or refuse the pending approvals, or wait for them "
                          f"to expire. See {condition('too_many_pending')}")


def denied(code: DenialCode, reason: str, grant: str | None) -> Denied:
    """A `denied` answer, with its code's runbook pointer (the one builder of one)."""
    return Denied(code=code, reason=reason, grant=grant, runbook=DENIAL_RUNBOOKS[code])


def args_too_long(size: int, limit: int) -> str:
    """Why a call whose arguments are too long to record is denied `bad_args`."""
    return (f"the arguments are {size} bytes; at most {limit} are allowed "
            "([policy] max_args_bytes)")


def too_long_to_record(tool: str, why: str, taint: Taint, grants_digest: str) -> Decision:
    """brokerd's own `bad_args`, before the policy sees the call (`bounded_request`)."""
    return refusal("bad_args", why, tool=tool, state=taint, grants_digest=grants_digest)


def unanswerable(grant: str) -> Denied:
    """The answer of a waiter whose approval brokerd failed to answer (its own bug)."""
    return denied("expired", "brokerd could not answer this approval", grant)


# -- what a call is, and what an approval shows


@attrs.define(kw_only=True)
class CallRequest:
    """One decodable call on broker.sock, and who sent it."""

    session: str
    tool: str
    args: dict[str, Any]
    peer_uid: int
    peer_pid: int
    omitted: OmittedArgs | None = None
    """The arguments are too long to record: the `call` record carries `{}` and these."""


def bounded_request(session: str, tool: str, args: dict[str, Any], *, peer_uid: int,
                    peer_pid: int, max_args_bytes: int) -> tuple[CallRequest, str | None]:
    """The call as recorded, and why brokerd denies it itself when its arguments are
    too long (None: they are not).

    Arguments longer than `max_args_bytes` (canonical UTF-8) are not recorded:
    the `call` record carries `{}` with their size and hash, and the call is
    denied `bad_args` before the policy sees it (`Ledger.decide`).
    """
    data = dumps_bytes(canonical(args))
    omitted = None
    too_long = None
    if len(data) > max_args_bytes:
        omitted = OmittedArgs(bytes=U64(len(data)), sha256=hashlib.sha256(data).hexdigest())
        too_long = args_too_long(len(data), max_args_bytes)
    return CallRequest(session=session, tool=tool, args=args, peer_uid=peer_uid,
                       peer_pid=peer_pid, omitted=omitted), too_long


@attrs.frozen(kw_only=True)
class Ticket:
    """An approval's id, times and challenge (drawn by the ledger: ids, clocks, a nonce)."""

    approval_id: int
    grant: str
    """The grant the owner is asked under (what a denial after the ask names)."""
    requested_at: str
    expires_at: str
    deadline: float
    """trio time of the expiry."""
    ttl_s: float
    challenge: bytes
    """What a passkey signs to approve exactly this call (11-approvals-web)."""
    nonce: str = ""
    """The challenge's nonce, kept beside the log with an approving assertion."""


# -- events


@attrs.define(kw_only=True)
class Decided:
    verdict: Verdict
    taint: Taint
    grants_digest: str
    ticket: Ticket | None = None
    """For an ask: the approval it waits under."""

    @property
    def kind(self) -> str:
        verdict = self.verdict
        if isinstance(verdict, Ask):
            return "decided_ask"
        return "decided_allow" if verdict.code is None else "decided_deny"


@attrs.define(kw_only=True)
class Approved:
    redecision: Decision
    """The re-decision (`policy._decide.redecide`): allowed, or denied."""
    taint: Taint
    """The session's taint at the re-decision."""
    by: int
    passkey: PasskeyUse | None = None

    @property
    def kind(self) -> str:
        return "approved_allow" if self.redecision.code is None else "approved_deny"


@attrs.define(kw_only=True)
class Refused:
    by: int
    reason: str | None
    kind: ClassVar[str] = "refused"


@attrs.define(kw_only=True)
class Expired:
    reason: str | None = None
    """None: its time ran out; `shutdown`: brokerd is stopping."""
    kind: ClassVar[str] = "expired"


@attrs.define(kw_only=True)
class RequesterGone:
    kind: ClassVar[str] = "requester_gone"


@attrs.define(kw_only=True)
class Started:
    """The call holds a run slot."""

    kind: ClassVar[str] = "started"


@attrs.define(kw_only=True)
class NotRun:
    """No run slot (the queue is full, the wait too long, the requester gone first)."""

    reason: str
    taint: Taint
    """The session's taint as it is now."""
    kind: ClassVar[str] = "not_run"


@attrs.define(kw_only=True)
class Settled:
    status: ResultStatus
    output: dict[str, Any] | None
    message: str | None
    taint: Taint
    """The session's taint as it is now (a call that ran raises it)."""
    runbook: str | None = None  # a runner_unavailable's pointer when not the code's own
    source: dict[str, Any] | None = None
    """12: `result.source` of a tool source's call."""
    kind: ClassVar[str] = "settled"


@attrs.define(kw_only=True)
class AuditFailed:
    """The records of the step just fed could not be written."""

    message: str
    kind: ClassVar[str] = "audit_failed"


CallEvent = (Decided | Approved | Refused | Expired | RequesterGone | Started | NotRun | Settled
             | AuditFailed)

# -- replies: the wire's answers, and Run


@attrs.define(kw_only=True)
class Run:
    """The call is allowed (at its decision or its re-decision): it runs next."""

    allow: Decision


Reply = Pending | Run | Denied | ErrorAnswer | Result
"""What the call's requester is told (broker.sock's answers, sent as they are), or,
for `Run`, what happens next."""

FINAL_REPLIES: Final = (Denied, ErrorAnswer, Result)
"""The replies that end a call on the wire (each call gets at most one)."""

# -- effects


@attrs.define(kw_only=True)
class HoldApproval:
    """Put the call in the pending table (its records are durable)."""

    ticket: Ticket


@attrs.define(kw_only=True)
class ReleaseApproval:
    """The approval record is durable: the id rests for 2 x ttl, then may be drawn."""

    approval_id: int
    hold_s: float


@attrs.define(kw_only=True)
class SetTaint:
    """The session's taint after the result record (written behind the log)."""

    session: str
    taint: Taint


Effect = HoldApproval | ReleaseApproval | SetTaint
"""What the ledger carries out once the step's records are durable."""


@attrs.define
class Step:
    records: tuple[Event, ...] = ()
    """The audit records to append (in this order, consecutive)."""
    effects: tuple[Effect, ...] = ()
    reply: Reply | None = None
    """The requester's part: what it is told, or that its call runs."""
