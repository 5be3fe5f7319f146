"""The life of one tool call in brokerd, as one table (05-brokerd "Handling one
call" and "Approvals"; issue 12).

In the manner of h11's `_state.py`: the states of a call, the events that move
it, and every transition as data (`TRANSITIONS`).  `CallLifecycle.feed(event)`
moves the call and returns a `Step`: the audit records to append, and the
effects to carry out once they are durable.  An event that the table has no
transition for raises `CallProtocolError`.  No I/O, no trio, no clock: what a
step needs (the taint, the verdict, the approval's ticket) comes in its event.

    RECEIVED  -decided_allow-->  DECIDED   -started-->  RUNNING  -settled--> SETTLED
              -decided_ask---->  PENDING
              -decided_deny--->  DENIED
    PENDING   -approved_allow->  APPROVED  -started-->  RUNNING
              -approved_deny-->  DENIED    (approved, but the re-decision no longer allows it)
              -refused-------->  REFUSED
              -expired-------->  EXPIRED
              -requester_gone->  REQUESTER_GONE
    DECIDED, APPROVED -not_run-> SETTLED   (no run slot, or the requester left before its turn)
    a state entered by a step whose records were not written -audit_failed-> UNRECORDED

The I/O around it feeds the events: `_ledger` (append and fsync), `_broker`
(run and answer), `_admin` (the owner's answer), `_serve` (the expiry sweep).
Each ledger step is a synchronous function that reads the state, feeds this
table and returns the records; its only `await` is the append of what it
returned, so no other task moves the state between the read and the append.

The verdicts and the ticket are frozen; the events, steps and replies, made
afresh for every call and changed by nobody, are plain slotted attrs classes
(a frozen attrs init costs nearly twice as much, on every call's path).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Literal, TypeGuard, get_args

import attrs

from .._error_table import condition
from .._errors import InternalError
from ..policy._decision import Ask, Decision
from ..proto._convert import U64, JsonObject
from ..proto._json import canonical, dumps_bytes
from ..proto._taint import Label, Taint
from ..proto.audit import (
    ApprovalRecord,
    BoundedCall,
    DecisionRecord,
    Event,
    OmittedArgs,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    OutputDigest,
    PasskeyUse,
    Peer,
    Redecision,
    ResultRecord,
    ResultStatus,
)
from ..proto.wire import DenialCode
from ..proto.wire import ResultStatus as RanStatus
from ._call_errors import CallFailed, CallNotRecorded, runner_unavailable, same_error


class CallState(enum.Enum):
    __hash__ = object.__hash__  # members are singletons: identity (C) hashing, not Enum's

    RECEIVED = "received"
    DECIDED = "decided"
    """Allowed at its decision; waits for a run slot."""
    PENDING = "pending"
    APPROVED = "approved"
    """Approved, and the re-decision allows it; waits for a run slot."""
    REFUSED = "refused"
    EXPIRED = "expired"
    REQUESTER_GONE = "requester_gone"
    RUNNING = "running"
    SETTLED = "settled"
    DENIED = "denied"
    """Failure: denied at its decision, or by the re-decision of its approval."""
    UNRECORDED = "unrecorded"
    """Failure: a step's records could not be written (answered audit_unavailable)."""


class CallProtocolError(InternalError):
    """An event that the call's state has no transition for (brokerd's own bug)."""


# -- verdicts: the policy's word, and brokerd's own denials, in one shape


@attrs.frozen(init=False)
class Allow:
    """The policy allowed the call: the only thing a RunSpec is built from."""

    decision: Decision
    grant: str | None
    label: Label
    """D8's result label (what the call's output is labelled)."""
    untrusted: bool

    def __init__(self, decision: Decision) -> None:
        if not isinstance(decision, Decision) or not decision.allowed:
            raise TypeError("a RunSpec is built only from an allowed Decision")
        self.__attrs_init__(decision=decision, grant=decision.grant,
                            label=decision.label or "public",
                            untrusted=bool(decision.untrusted))


@attrs.frozen
class AskOwner:
    """The call waits for the owner; `ask` is re-decided at approval time."""

    ask: Ask

    @property
    def grant(self) -> str:
        return self.ask.grant


@attrs.frozen(kw_only=True)
class Deny:
    code: DenialCode
    reason: str
    """Whole, for the answer; the record carries it bounded (`bound_reason`)."""
    grant: str | None = None


Verdict = Allow | AskOwner | Deny

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


def exhausted(verdict: AskOwner, why: str) -> Deny:
    """An ask with no approval id free: recorded and answered denied."""
    return Deny(code="approvals_exhausted", grant=verdict.grant,
                reason=f"no approval id is free ({why}); answer the pending "
                       f"approvals or wait. See {condition('approvals_exhausted')}")


def too_many_pending(verdict: AskOwner, why: str) -> Deny:
    """An ask past `[approvals] max_pending` or `max_pending_per_session`: recorded
    and answered denied at once (issue 22 item 9)."""
    return Deny(code="too_many_pending", grant=verdict.grant,
                reason=f"{why}; answer or refuse the pending approvals, or wait for them "
                       f"to expire. See {condition('too_many_pending')}")


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
                    peer_pid: int, max_args_bytes: int) -> tuple[CallRequest, Deny | None]:
    """The call as recorded, and brokerd's own denial when its arguments are too long.

    Arguments longer than `max_args_bytes` (canonical UTF-8) are not recorded:
    the `call` record carries `{}` with their size and hash, and the call is
    denied `bad_args` before the policy sees it.
    """
    data = dumps_bytes(canonical(args))
    omitted = None
    too_long = None
    if len(data) > max_args_bytes:
        omitted = OmittedArgs(bytes=U64(len(data)), sha256=hashlib.sha256(data).hexdigest())
        too_long = Deny(code="bad_args", reason=f"the arguments are {len(data)} bytes; at most "
                        f"{max_args_bytes} are allowed ([policy] max_args_bytes)")
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
        return _DECIDED_KINDS[type(self.verdict)]


@attrs.define(kw_only=True)
class Approved:
    redecision: Allow | Deny
    taint: Taint
    """The session's taint at the re-decision."""
    by: int
    passkey: PasskeyUse | None = None

    @property
    def kind(self) -> str:
        return "approved_allow" if isinstance(self.redecision, Allow) else "approved_deny"


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
    kind: ClassVar[str] = "settled"


@attrs.define(kw_only=True)
class AuditFailed:
    """The records of the step just fed could not be written."""

    message: str
    kind: ClassVar[str] = "audit_failed"


_DECIDED_KINDS: Final[Mapping[type, str]] = {Allow: "decided_allow", AskOwner: "decided_ask",
                                            Deny: "decided_deny"}

CallEvent = (Decided | Approved | Refused | Expired | RequesterGone | Started | NotRun | Settled
             | AuditFailed)

# -- effects


@attrs.define(kw_only=True)
class AnswerPending:
    approval_id: int
    expires_at: str
    grant: str


@attrs.define(kw_only=True)
class Run:
    allow: Allow


@attrs.define(kw_only=True)
class AnswerDenied:
    code: DenialCode
    reason: str
    grant: str | None


@attrs.define(kw_only=True)
class AnswerError:
    error: CallFailed = attrs.field(eq=attrs.cmp_using(eq=same_error))


@attrs.define(kw_only=True)
class AnswerResult:
    status: RanStatus
    output: dict[str, Any] | None
    label: Label
    untrusted: bool


Reply = AnswerPending | Run | AnswerDenied | AnswerError | AnswerResult
"""What the call's requester is told (or, for `Run`, what happens next)."""

FINAL_REPLIES: Final = (AnswerDenied, AnswerError, AnswerResult)
"""The replies that end a call on the wire (each call gets at most one)."""


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


# -- the table

S = CallState

TRANSITIONS: Final[Mapping[CallState, Mapping[str, CallState]]] = {
    S.RECEIVED: {"decided_allow": S.DECIDED, "decided_ask": S.PENDING,
                 "decided_deny": S.DENIED},
    S.DECIDED: {"started": S.RUNNING, "not_run": S.SETTLED, "audit_failed": S.UNRECORDED},
    S.PENDING: {"approved_allow": S.APPROVED, "approved_deny": S.DENIED,
                "refused": S.REFUSED, "expired": S.EXPIRED,
                "requester_gone": S.REQUESTER_GONE, "audit_failed": S.UNRECORDED},
    S.APPROVED: {"started": S.RUNNING, "not_run": S.SETTLED, "audit_failed": S.UNRECORDED},
    S.RUNNING: {"settled": S.SETTLED},
    S.DENIED: {"audit_failed": S.UNRECORDED},
    S.REFUSED: {"audit_failed": S.UNRECORDED},
    S.EXPIRED: {"audit_failed": S.UNRECORDED},
    S.REQUESTER_GONE: {"audit_failed": S.UNRECORDED},
    S.SETTLED: {"audit_failed": S.UNRECORDED},
    S.UNRECORDED: {},
}
"""state -> event kind -> next state.  `audit_failed` is taken only right after a
step with records (their append failed); otherwise it too raises."""

TERMINAL: Final = frozenset(s for s, moves in TRANSITIONS.items()
                            if set(moves) <= {"audit_failed"})

RAN: Final[frozenset[str]] = frozenset(get_args(RanStatus))
"""Result statuses of a call whose tool ran (its output raises the taint)."""


class CallLifecycle:
    """One call's state; `feed` is the only thing that moves it."""

    def __init__(self, call_id: int, request: CallRequest) -> None:
        self.call_id = call_id
        self.request = request
        self.state = CallState.RECEIVED
        self.verdict: Verdict | None = None
        """The latest word on the call: its decision, then its re-decision."""
        self.ticket: Ticket | None = None
        self._unconfirmed = False

    def feed(self, event: CallEvent) -> Step:
        """Move the call; the records to append and the effects once they are durable.

        Raises CallProtocolError for an event the table has no transition for.
        """
        kind = event.kind
        target = TRANSITIONS[self.state].get(kind)
        if target is None or (kind == "audit_failed" and not self._unconfirmed):
            raise CallProtocolError(
                f"call {self.call_id}: no transition for {kind} in state {self.state.value}")
        step = _BUILDERS[type(event)](self, event)
        self.state = target
        self._unconfirmed = bool(step.records)
        return step

    def recorded(self) -> None:
        """The records of the last step are durable (`audit_failed` no longer applies)."""
        self._unconfirmed = False

    @property
    def allow(self) -> Allow:
        """The verdict that lets it run (DECIDED, APPROVED, RUNNING)."""
        if not isinstance(self.verdict, Allow):
            raise CallProtocolError(f"call {self.call_id} is not allowed")
        return self.verdict

    # -- what each transition records and does

    def _decided(self, event: Decided) -> Step:
        request, verdict = self.request, event.verdict
        effects: tuple[Effect, ...] = ()
        reply: Reply
        outcome: OutcomeAllowed | OutcomeAsk | OutcomeDenied
        if isinstance(verdict, Allow):
            outcome, reply = OutcomeAllowed(), Run(allow=verdict)
        elif isinstance(verdict, AskOwner):
            ticket = event.ticket
            if ticket is None:
                raise CallProtocolError(f"call {self.call_id}: an ask needs its approval")
            self.ticket = ticket  # the event is whole: nothing below raises
            outcome = OutcomeAsk(approval_id=U64(ticket.approval_id),
                                 expires_at=ticket.expires_at)
            effects = (HoldApproval(ticket=ticket),)
            reply = AnswerPending(approval_id=ticket.approval_id, expires_at=ticket.expires_at,
                                  grant=verdict.grant)
        else:
            outcome = OutcomeDenied(code=verdict.code, reason=bound_reason(verdict.reason))
            reply = AnswerDenied(code=verdict.code, reason=verdict.reason, grant=verdict.grant)
        self.verdict = verdict
        call = BoundedCall(
            session=request.session, tool=request.tool,
            args=JsonObject({} if request.omitted is not None else request.args),
            peer=Peer(uid=U64(request.peer_uid), pid=U64(request.peer_pid)),
            omitted=request.omitted)
        decision = DecisionRecord(call=U64(self.call_id), outcome=outcome, grant=verdict.grant,
                                  state=event.taint, grants_digest=event.grants_digest)
        return Step(records=(call, decision), effects=effects, reply=reply)

    def _answered(self, verdict: Literal["approved", "refused", "expired", "requester_gone"],
                  *, by: int | None, reason: str | None, redecision: Redecision | None,
                  reply: Reply, passkey: PasskeyUse | None = None) -> Step:
        ticket = self._ticket()
        record = ApprovalRecord(call=U64(self.call_id), approval_id=U64(ticket.approval_id),
                                verdict=verdict, by=None if by is None else U64(by),
                                reason=reason, redecision=redecision, passkey=passkey)
        release = ReleaseApproval(approval_id=ticket.approval_id, hold_s=2 * ticket.ttl_s)
        return Step(records=(record,), effects=(release,), reply=reply)

    def _approved(self, event: Approved) -> Step:
        again = event.redecision
        self.verdict = again
        if isinstance(again, Allow):
            redecision = Redecision(outcome=OutcomeAllowed(), grant=again.grant,
                                    state=event.taint)
            reply: Reply = Run(allow=again)
        else:
            redecision = Redecision(
                outcome=OutcomeDenied(code=again.code, reason=bound_reason(again.reason)),
                grant=again.grant, state=event.taint)
            reply = AnswerDenied(code=again.code, reason=again.reason, grant=self._ticket_grant())
        return self._answered("approved", by=event.by, reason=None, redecision=redecision,
                              reply=reply, passkey=event.passkey)

    def _refused(self, event: Refused) -> Step:
        why = f"refused by the owner{': ' + event.reason if event.reason else ''}"
        return self._answered("refused", by=event.by, reason=event.reason, redecision=None,
                              reply=AnswerDenied(code="refused", reason=why,
                                                 grant=self._ticket_grant()))

    def _expired(self, event: Expired) -> Step:
        why = ("the approval expired" if event.reason is None
               else f"the approval expired ({event.reason})")
        return self._answered("expired", by=None, reason=event.reason, redecision=None,
                              reply=AnswerDenied(code="expired", reason=why,
                                                 grant=self._ticket_grant()))

    def _requester_gone(self, event: RequesterGone) -> Step:
        return self._answered("requester_gone", by=None,
                              reason="the requester closed its connection", redecision=None,
                              reply=AnswerDenied(code="expired", reason="the requester went away",
                                                 grant=self._ticket_grant()))

    def _started(self, event: Started) -> Step:
        return Step()

    def _result(self, status: ResultStatus, output: dict[str, Any] | None, message: str | None,
                taint: Taint, runbook: str | None = None) -> Step:
        allow = self.allow
        label, untrusted = allow.label, allow.untrusted
        ran = status in RAN
        after = taint.raised_by(label, untrusted) if ran else taint
        record = ResultRecord(call=U64(self.call_id), status=status, label=label,
                              untrusted=untrusted, state=after,
                              output=output_digest(output) if ran else None)
        reply: Reply
        if status == "runner_unavailable":
            reply = AnswerError(error=runner_unavailable(runbook,
                f"brokerd: {message or 'the runner is unavailable'}; nothing ran. "
                f"See {runbook or condition('runner_unavailable')}"))
        elif status == "unsafe_target":
            reply = AnswerDenied(code="unsafe_target", reason=message or "unsafe target",
                                 grant=allow.grant)
        elif _ran(status):
            reply = AnswerResult(status=status, output=output, label=label, untrusted=untrusted)
        else:  # pragma: no cover - RAN and the two above are every status
            raise CallProtocolError(f"call {self.call_id}: no result status {status}")
        effects: tuple[Effect, ...] = ()
        if after != taint:
            effects = (SetTaint(session=self.request.session, taint=after),)
        return Step(records=(record,), effects=effects, reply=reply)

    def _not_run(self, event: NotRun) -> Step:
        return self._result("runner_unavailable", None, event.reason, event.taint)

    def _settled(self, event: Settled) -> Step:
        return self._result(event.status, event.output, event.message, event.taint,
                            event.runbook)

    def _audit_failed(self, event: AuditFailed) -> Step:
        return Step(reply=AnswerError(error=CallNotRecorded(event.message)))

    def _ticket(self) -> Ticket:
        if self.ticket is None:  # pragma: no cover - the table allows this only from PENDING
            raise CallProtocolError(f"call {self.call_id} has no approval")
        return self.ticket

    def _ticket_grant(self) -> str:
        return self._ticket().grant


_BUILDERS: Final[Mapping[type, Callable[[CallLifecycle, Any], Step]]] = {
    Decided: CallLifecycle._decided,
    Approved: CallLifecycle._approved,
    Refused: CallLifecycle._refused,
    Expired: CallLifecycle._expired,
    RequesterGone: CallLifecycle._requester_gone,
    Started: CallLifecycle._started,
    NotRun: CallLifecycle._not_run,
    Settled: CallLifecycle._settled,
    AuditFailed: CallLifecycle._audit_failed,
}


def _ran(status: ResultStatus) -> TypeGuard[RanStatus]:
    return status in RAN
