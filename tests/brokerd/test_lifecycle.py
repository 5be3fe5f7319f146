"""The call table (brokerd/_lifecycle.py): every transition, and every missing one."""

from __future__ import annotations

import pytest

from boxmaker.brokerd._call_errors import RunnerUnavailable
from boxmaker.brokerd._call_events import (
    Approved,
    Decided,
    HoldApproval,
    ReleaseApproval,
    Run,
    SetTaint,
    Settled,
    Started,
    bound_reason,
    denied,
)
from boxmaker.brokerd._lifecycle import (
    TERMINAL,
    TRANSITIONS,
    CallLifecycle,
    CallProtocolError,
    CallState,
)
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.audit._audit import (
    ApprovalRecord,
    BoundedCall,
    DecisionRecord,
    OutcomeAsk,
    OutcomeDenied,
    ResultRecord,
)
from boxmaker.proto.wire import DENIAL_RUNBOOKS, Denied, Pending, Result, answer_of
from tests.brokerd._calls import (
    KINDS,
    PATHS,
    allow,
    ask,
    call_in,
    decided,
    deny,
    event_of,
    request,
)

PAIRS = [(state, kind) for state in CallState for kind in TRANSITIONS[state]]
MISSING = [(state, kind) for state in CallState for kind in KINDS
           if kind not in TRANSITIONS[state]]


def test_every_state_is_in_the_table_and_reachable() -> None:
    assert set(TRANSITIONS) == set(CallState)
    assert {s.value for s in CallState} == set(PATHS)
    assert {k for moves in TRANSITIONS.values() for k in moves} == set(KINDS)
    ends = {CallState.DENIED, CallState.REFUSED, CallState.EXPIRED, CallState.REQUESTER_GONE,
            CallState.SETTLED, CallState.UNRECORDED}
    assert ends == TERMINAL


@pytest.mark.parametrize(("state", "kind"), PAIRS, ids=[f"{s.value}-{k}" for s, k in PAIRS])
def test_each_transition_goes_where_the_table_says(state: CallState, kind: str) -> None:
    call = call_in(state.value)
    if kind != "audit_failed":
        call.recorded()
    call.feed(event_of(kind))
    assert call.state is TRANSITIONS[state][kind]


@pytest.mark.parametrize(("state", "kind"), MISSING, ids=[f"{s.value}-{k}" for s, k in MISSING])
def test_a_missing_transition_raises_and_moves_nothing(state: CallState, kind: str) -> None:
    call = call_in(state.value)
    call.recorded()
    with pytest.raises(CallProtocolError, match=f"no transition for {kind} in state"):
        call.feed(event_of(kind))
    assert call.state is state


@pytest.mark.parametrize("state", [s for s in CallState
                                   if "audit_failed" in TRANSITIONS[s]])
def test_audit_failed_only_right_after_a_step_with_records(state: CallState) -> None:
    call = call_in(state.value)
    call.recorded()  # its records are durable: the append did not fail
    with pytest.raises(CallProtocolError):
        call.feed(event_of("audit_failed"))
    assert call.state is state


def test_decided_allow_records_call_and_decision_then_runs() -> None:
    call = CallLifecycle(5, request())
    step = call.feed(decided(allow()))
    assert [type(r) for r in step.records] == [BoundedCall, DecisionRecord]
    decision = step.records[1]
    assert isinstance(decision, DecisionRecord) and decision.call == 5
    assert decision.grant == "echo-allow" and decision.state == NEW_SESSION
    assert step.effects == () and step.reply == Run(allow=allow())


def test_decided_ask_holds_the_approval_and_answers_pending() -> None:
    call = CallLifecycle(5, request())
    step = call.feed(decided(ask(), approval_id=654_321))
    decision = step.records[1]
    assert isinstance(decision, DecisionRecord)
    assert decision.outcome == OutcomeAsk(approval_id=654_321,  # type: ignore[arg-type]
                                          expires_at="2026-11-29T07:10:00.000000Z")
    assert isinstance(step.effects[0], HoldApproval)
    assert step.reply == Pending(approval_id=654_321,  # type: ignore[arg-type]
                                 expires_at="2026-11-29T07:10:00.000000Z",
                                 grant="echo-ask")


def test_an_ask_without_its_ticket_raises() -> None:
    call = CallLifecycle(5, request())
    with pytest.raises(CallProtocolError, match="needs its approval"):
        call.feed(Decided(verdict=ask(), taint=NEW_SESSION, grants_digest="0" * 64))
    assert call.state is CallState.RECEIVED and call.verdict is None and call.ticket is None


def test_a_long_denial_is_whole_on_the_wire_and_bounded_in_the_record() -> None:
    reason = "x" * 10_000
    step = CallLifecycle(5, request()).feed(decided(deny("bad_args", reason)))
    decision = step.records[1]
    assert isinstance(decision, DecisionRecord) and isinstance(decision.outcome, OutcomeDenied)
    assert decision.outcome.reason == bound_reason(reason) != reason
    assert step.reply == Denied(code="bad_args", reason=reason, grant=None,
                                runbook=DENIAL_RUNBOOKS["bad_args"])


def test_an_approval_whose_redecision_denies_names_the_asked_grant() -> None:
    call = call_in("pending")
    call.recorded()
    again = deny("changed", "the grants changed")
    step = call.feed(Approved(redecision=again, taint=NEW_SESSION, by=1000))
    (record,) = step.records
    assert isinstance(record, ApprovalRecord) and record.verdict == "approved"
    assert record.redecision is not None and record.redecision.outcome == OutcomeDenied(
        code="changed", reason="the grants changed")
    assert step.effects == (ReleaseApproval(approval_id=123_456, hold_s=1200.0),)
    assert step.reply == denied("changed", "the grants changed", "echo-ask")
    assert call.state is CallState.DENIED


@pytest.mark.parametrize(("kind", "verdict", "code", "reason"), [
    ("refused", "refused", "refused", "refused by the owner: no"),
    ("expired", "expired", "expired", "the approval expired"),
    ("requester_gone", "requester_gone", "expired", "the requester went away"),
])
def test_the_ends_of_an_approval(kind: str, verdict: str, code: str, reason: str) -> None:
    call = call_in("pending")
    call.recorded()
    step = call.feed(event_of(kind))
    (record,) = step.records
    assert isinstance(record, ApprovalRecord) and record.verdict == verdict
    assert step.reply == denied(code, reason, "echo-ask")  # type: ignore[arg-type]


def test_a_result_raises_the_taint_as_it_is_now() -> None:
    call = CallLifecycle(5, request())
    private = Taint(label="private", untrusted=False)
    call.feed(decided(allow()))
    call.feed(Started())
    step = call.feed(Settled(status="timeout", output=None, message=None, taint=private))
    (record,) = step.records
    assert isinstance(record, ResultRecord) and record.output is None
    assert record.state == Taint(label="private", untrusted=False)  # public, trusted grant
    assert step.reply == Result(status="timeout", output=None, label="public",
                                untrusted=False)
    assert not any(isinstance(e, SetTaint) for e in step.effects)


@pytest.mark.parametrize(("status", "reply"), [
    ("runner_unavailable", answer_of(RunnerUnavailable(
        "brokerd: no podman; nothing ran. See docs/runbook.md#runner-unavailable"))),
    ("unsafe_target", Denied(code="unsafe_target", reason="no podman",
                             grant="echo-allow", runbook=DENIAL_RUNBOOKS["unsafe_target"])),
])
def test_results_that_are_not_results(status: str, reply: object) -> None:
    call = call_in("running")
    step = call.feed(Settled(status=status, output=None,  # type: ignore[arg-type]
                             message="no podman", taint=NEW_SESSION))
    assert step.reply == reply
    (record,) = step.records
    assert isinstance(record, ResultRecord) and record.status == status


def test_audit_failed_answers_audit_unavailable_and_ends_the_call() -> None:
    call = call_in("unrecorded")
    assert call.state in TERMINAL and TRANSITIONS[call.state] == {}
    with pytest.raises(CallProtocolError):
        call.feed(Started())
