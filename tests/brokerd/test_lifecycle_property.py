"""Random event sequences through the call table (issue 12): approve, refuse, expire,
requester gone, grant change, restart, a disk that fails, and events fed to calls
in any state.

A small driver plays the ledger's part with no I/O: a step's records go to an
in-memory log, its effects are carried out only if the "append" succeeded, and
otherwise `AuditFailed` is fed and its effects are carried out instead.  The
invariants:
  - every call is answered at most once (one final reply on the wire);
  - nothing runs that was not allowed at run time: a call starts only after a
    `Run`, and that `Run` came from a decision or re-decision that the grant
    set of that moment allows (checked again against the real policy);
  - every acknowledged call has its records (pending: call + decision;
    an answer after an approval: its approval record; a result: its result);
  - a call whose approval was recorded expired, refused or requester_gone
    never runs, and nothing is recorded twice for a call;
  - the session's taint is what the result records in the log say.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.brokerd._call_events import (
    FINAL_REPLIES,
    Approved,
    AuditFailed,
    CallEvent,
    Decided,
    Expired,
    NotRun,
    Refused,
    RequesterGone,
    Run,
    SetTaint,
    Settled,
    Started,
    Step,
    Ticket,
)
from boxmaker.brokerd._lifecycle import CallLifecycle, CallProtocolError, CallState
from boxmaker.policy._decision import Ask, Decision
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.audit._audit import (
    ApprovalRecord,
    BoundedCall,
    DecisionRecord,
    Event,
    ResultRecord,
)
from boxmaker.proto.wire import ErrorAnswer, Pending
from tests.brokerd._calls import ARGS, GRANT_SETS, LINK, echo_grants, request
from tests.conftest import examples

GRANTS = {**GRANT_SETS, "allow-private": echo_grants("allow", label="private")}
MODES = list(GRANTS)


@attrs.define
class World:
    """brokerd as the table sees it: the log, the taint, the calls, the wire."""

    mode: str | None = "allow"
    disk_ok: bool = True
    taint: Taint = NEW_SESSION
    log: list[tuple[int, Event]] = attrs.field(factory=list)
    calls: list[CallLifecycle] = attrs.field(factory=list)
    replies: dict[int, list[Any]] = attrs.field(factory=dict)
    runs: dict[int, tuple[Run, str | None]] = attrs.field(factory=dict)
    """The Run carried out for each call, and the grant mode it was decided under."""
    started: set[int] = attrs.field(factory=set)
    next_approval: int = 100_000
    next_call: int = 0

    def commit(self, call: CallLifecycle, step: Step) -> None:
        """Append (or fail), then carry out what stands."""
        if step.records and not self.disk_ok:
            step = call.feed(AuditFailed(message="the audit log is unavailable"))
        else:
            self.log += [(call.call_id, record) for record in step.records]
            call.recorded()
        for effect in step.effects:
            if isinstance(effect, SetTaint):
                self.taint = effect.taint
        reply = step.reply
        if isinstance(reply, Run):
            self.runs[call.call_id] = (reply, self.mode)
        if reply is not None:
            self.replies.setdefault(call.call_id, []).append(reply)

    def feed(self, call: CallLifecycle, event: CallEvent) -> None:
        before = call.state
        try:
            step = call.feed(event)
        except CallProtocolError:
            assert call.state is before  # a refused event moves nothing
            return
        if isinstance(event, Started):
            self.started.add(call.call_id)
        self.commit(call, step)


def new_call(world: World) -> None:
    world.next_call += 1
    call = CallLifecycle(world.next_call, request())
    verdict = LINK.decide("echo", ARGS, world.taint, GRANTS[world.mode])
    ticket = None
    if isinstance(verdict, Ask):
        world.next_approval += 1
        ticket = Ticket(approval_id=world.next_approval, grant=verdict.grant,
                        requested_at="2026-11-29T07:00:00.000000Z",
                        expires_at="2026-11-29T07:10:00.000000Z", deadline=1.0, ttl_s=1.0,
                        challenge=b"")
    world.calls.append(call)
    world.feed(call, Decided(verdict=verdict, taint=world.taint, grants_digest="0" * 64,
                             ticket=ticket))


def approve(world: World, call: CallLifecycle) -> None:
    asked = call.verdict
    if not isinstance(asked, Ask):
        # Never asked: the table must refuse an approval (any re-decision will do).
        world.feed(call, Approved(redecision=_any_allow(), taint=world.taint, by=1000))
        return
    again = LINK.redecide(asked, world.taint, GRANTS[world.mode])
    world.feed(call, Approved(redecision=again, taint=world.taint, by=1000))


def _any_allow() -> Decision:
    found = LINK.decide("echo", ARGS, NEW_SESSION, GRANTS["allow"])
    assert isinstance(found, Decision) and found.allowed
    return found


def restart(world: World) -> None:
    """brokerd stops (pending approvals expire, reason shutdown) and starts again."""
    for call in world.calls:
        if call.state is CallState.PENDING:
            world.feed(call, Expired(reason="shutdown"))
    world.calls = [c for c in world.calls if c.state in (CallState.RUNNING,)]
    world.disk_ok = True  # the owner fixed the disk
    world.taint = taint_from_log(world)


def taint_from_log(world: World) -> Taint:
    taint = NEW_SESSION
    for _, record in world.log:
        if isinstance(record, ResultRecord):
            taint = record.state
    return taint


ACTIONS = ("call", "call", "approve", "approve", "refuse", "expire", "gone", "start",
           "start", "settle", "settle", "not_run", "grants", "grants", "restart", "disk")
"""Weighted by repetition: calls, approvals, starts and grant changes most often."""

STATUSES = ("ok", "tool_failed", "timeout", "runner_unavailable", "unsafe_target")


def step_world(world: World, action: str, index: int, pick: int) -> None:
    if action == "call":
        new_call(world)
        return
    if action == "grants":
        world.mode = MODES[pick % len(MODES)]
        return
    if action == "restart":
        restart(world)
        return
    if action == "disk":
        world.disk_ok = not world.disk_ok
        return
    if not world.calls:
        return
    call = world.calls[-1 - index % len(world.calls)]  # the newest calls, most often
    events: dict[str, CallEvent] = {
        "refuse": Refused(by=1000, reason="no"),
        "expire": Expired(),
        "gone": RequesterGone(),
        "start": Started(),
        "not_run": NotRun(reason="the queue is full", taint=world.taint),
        "settle": Settled(status=STATUSES[pick % len(STATUSES)],  # type: ignore[arg-type]
                          output={"text": "x"}, message=None, taint=world.taint),
    }
    if action == "approve":
        approve(world, call)
    else:
        world.feed(call, events[action])


def _unrecorded(reply: Any) -> bool:
    return isinstance(reply, ErrorAnswer) and reply.code == "audit_unavailable"


def check(world: World) -> None:
    records_of: dict[int, list[Event]] = {}
    for call_id, record in world.log:
        records_of.setdefault(call_id, []).append(record)
    for call_id, replies in world.replies.items():
        finals = [r for r in replies if isinstance(r, FINAL_REPLIES)]
        assert len(finals) <= 1, f"call {call_id} answered {finals}"
        kinds = [type(r) for r in records_of.get(call_id, [])]
        for kind in (BoundedCall, DecisionRecord, ApprovalRecord, ResultRecord):
            assert kinds.count(kind) <= 1, f"call {call_id}: {kinds}"
        acknowledged = [r for r in replies if not _unrecorded(r)]
        if acknowledged:
            assert kinds[:2] == [BoundedCall, DecisionRecord], f"call {call_id}: {kinds}"
        if any(isinstance(r, Pending) for r in replies) and len(acknowledged) > 1:
            assert ApprovalRecord in kinds, f"call {call_id}: answered with no approval record"
        if any(type(r).__name__ == "Result" for r in acknowledged):
            assert ResultRecord in kinds
    for call_id in world.started:
        assert call_id in world.runs, f"call {call_id} started without a Run"
        run, mode = world.runs[call_id]
        assert DecisionRecord in [type(r) for r in records_of.get(call_id, [])]
        assert GRANTS[mode].ok and mode in ("allow", "allow-private", "ask"), mode
        assert run.allow.grant == f"echo-{'ask' if mode == 'ask' else 'allow'}"
        approvals = [r for r in records_of.get(call_id, []) if isinstance(r, ApprovalRecord)]
        assert all(a.verdict == "approved" and a.redecision is not None
                   and type(a.redecision.outcome).__name__ == "OutcomeAllowed"
                   for a in approvals), f"call {call_id} ran after {approvals}"
    assert world.taint == taint_from_log(world)


@settings(max_examples=examples(1000), deadline=None)
@given(st.sampled_from(MODES),
       st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 3), st.integers(0, 9)),
                min_size=5, max_size=80))
def test_random_event_sequences_keep_the_invariants(
        mode: str | None, moves: list[tuple[str, int, int]]) -> None:
    world = World(mode=mode)
    for action, index, pick in moves:
        step_world(world, action, index, pick)
        check(world)
