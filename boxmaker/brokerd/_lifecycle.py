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

The events, the verdict they carry (the policy's `Decision | Ask`), the
replies (broker.sock's answers, plus `Run`) and the steps are in
`_call_events.py`, as h11 keeps `_events.py` beside `_state.py`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeGuard, get_args

from .._error_table import condition
from .._errors import InternalError
from ..policy._decision import Ask, Decision
from ..proto._convert import U64, InvalidValue, JsonObject, structure
from ..proto._taint import Label, Taint
from ..proto.audit import (
    ApprovalRecord,
    BoundedCall,
    CommandSource,
    DecisionRecord,
    McpSource,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    PasskeyUse,
    Peer,
    Redecision,
    ResultRecord,
    ResultStatus,
)
from ..proto.wire import ErrorAnswer, Pending, Result, answer_of
from ..proto.wire import ResultStatus as RanStatus
from ._call_errors import (
    CallFailed,
    CallNotRecorded,
    SourceUnavailableAnswer,
    runner_unavailable,
)
from ._call_events import (
    Approved,
    AuditFailed,
    CallEvent,
    CallRequest,
    Decided,
    Effect,
    Expired,
    HoldApproval,
    NotRun,
    Refused,
    ReleaseApproval,
    Reply,
    RequesterGone,
    Run,
    SetTaint,
    Settled,
    Started,
    Step,
    Ticket,
    Verdict,
    bound_reason,
    denied,
    output_digest,
)


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
    def allow(self) -> Decision:
        """The verdict that lets it run (DECIDED, APPROVED, RUNNING): an allowed Decision."""
        verdict = self.verdict
        if not isinstance(verdict, Decision) or verdict.code is not None:
            raise CallProtocolError(f"call {self.call_id} is not allowed")
        return verdict

    # -- what each transition records and does

    def _decided(self, event: Decided) -> Step:
        request, verdict = self.request, event.verdict
        effects: tuple[Effect, ...] = ()
        reply: Reply
        outcome: OutcomeAllowed | OutcomeAsk | OutcomeDenied
        if isinstance(verdict, Ask):
            ticket = event.ticket
            if ticket is None:
                raise CallProtocolError(f"call {self.call_id}: an ask needs its approval")
            approval_id = U64(ticket.approval_id)
            outcome = OutcomeAsk(approval_id=approval_id, expires_at=ticket.expires_at)
            reply = Pending(approval_id=approval_id, expires_at=ticket.expires_at,
                            grant=verdict.grant)
            self.ticket = ticket  # the event is whole: nothing below raises
            effects = (HoldApproval(ticket=ticket),)
        elif (code := verdict.code) is None:
            outcome, reply = OutcomeAllowed(), Run(allow=verdict)
        else:
            reason = verdict.reason
            outcome = OutcomeDenied(code=code, reason=bound_reason(reason))
            reply = denied(code, reason, verdict.grant)
        self.verdict = verdict
        call = BoundedCall(
            session=request.session, tool=request.tool,
            args=JsonObject({} if request.omitted is not None else request.args),
            peer=Peer(uid=U64(request.peer_uid), pid=U64(request.peer_pid)),
            omitted=request.omitted)
        effective = verdict.effective_args
        decision = DecisionRecord(
            call=U64(self.call_id), outcome=outcome, grant=verdict.grant, state=event.taint,
            grants_digest=event.grants_digest,
            effective_args=None if effective is None or effective == request.args
            or request.omitted is not None else JsonObject(effective),
            pin=verdict.pin)
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
        code = again.code
        reply: Reply
        if code is None:
            redecision = Redecision(outcome=OutcomeAllowed(), grant=again.grant,
                                    state=event.taint)
            reply = Run(allow=again)
        else:
            reason = again.reason
            redecision = Redecision(
                outcome=OutcomeDenied(code=code, reason=bound_reason(reason)),
                grant=again.grant, state=event.taint)
            reply = denied(code, reason, self._ticket_grant())
        return self._answered("approved", by=event.by, reason=None, redecision=redecision,
                              reply=reply, passkey=event.passkey)

    def _refused(self, event: Refused) -> Step:
        why = f"refused by the owner{': ' + event.reason if event.reason else ''}"
        return self._answered("refused", by=event.by, reason=event.reason, redecision=None,
                              reply=denied("refused", why, self._ticket_grant()))

    def _expired(self, event: Expired) -> Step:
        why = ("the approval expired" if event.reason is None
               else f"the approval expired ({event.reason})")
        return self._answered("expired", by=None, reason=event.reason, redecision=None,
                              reply=denied("expired", why, self._ticket_grant()))

    def _requester_gone(self, event: RequesterGone) -> Step:
        return self._answered("requester_gone", by=None,
                              reason="the requester closed its connection", redecision=None,
                              reply=denied("expired", "the requester went away",
                                           self._ticket_grant()))

    def _started(self, event: Started) -> Step:
        return Step()

    def _result(self, status: ResultStatus, output: dict[str, Any] | None, message: str | None,
                taint: Taint, runbook: str | None = None,
                source: dict[str, Any] | None = None) -> Step:
        allow = self.allow
        label = allow.label or "public"
        untrusted = bool(allow.untrusted)
        ran = status in RAN
        after = taint.raised_by(label, untrusted) if ran else taint
        record = ResultRecord(call=U64(self.call_id), status=status, label=label,
                              untrusted=untrusted, state=after,
                              output=output_digest(output) if ran else None,
                              source=None if source is None else structure(
                                  source, McpSource if source.get("kind") == "mcp"
                                  else CommandSource))
        reply: Reply | None
        if status == "runner_unavailable":
            reply = _error(runner_unavailable(runbook,
                f"brokerd: {message or 'the runner is unavailable'}; nothing ran. "
                f"See {runbook or condition('runner_unavailable')}"))
        elif status == "source_unavailable":
            reply = _error(SourceUnavailableAnswer(
                f"brokerd: {message or 'the server is unavailable'}; nothing ran. "
                f"See {SourceUnavailableAnswer.runbook}"))
        elif status in ("unsafe_target", "pin_mismatch"):
            reply = denied(status, message or status.replace("_", " "), allow.grant)
        elif _ran(status):
            reply = _result_answer(status, output, label, untrusted)
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
                            event.runbook, event.source)

    def _audit_failed(self, event: AuditFailed) -> Step:
        return Step(reply=_error(CallNotRecorded(event.message)))

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


def _result_answer(status: RanStatus, output: dict[str, Any] | None, label: Label,
                   untrusted: bool) -> Result | None:
    """The `result` answer of a call that ran; None when a runtime's output breaks the
    answer's rules (a runtime's bug: the result is recorded, and nobody is answered)."""
    try:
        return Result(status=status, output=JsonObject(output) if output is not None else None,
                      label=label, untrusted=untrusted)
    except InvalidValue:
        return None


def _error(error: CallFailed) -> ErrorAnswer:
    """An error reply: the wire's answer of the error class (`proto.wire.answer_of`,
    the one translation of a raised error on every socket)."""
    answer = answer_of(error)
    assert answer is not None  # a CallFailed has its wire code
    return answer


def _ran(status: ResultStatus) -> TypeGuard[RanStatus]:
    return status in RAN
