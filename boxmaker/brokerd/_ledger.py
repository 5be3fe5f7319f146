"""The ledger (04-audit "The ledger"): the audit writer, the session taints and
the pending approvals behind one lock; the I/O of the call table (`_lifecycle`).

The lock is trio's cooperative scheduling itself.  Every step is two halves:
a synchronous `_..._now` that reads the taints, feeds the call's lifecycle and
returns its `Step` (the records to append), and `_commit`, whose only `await`
is the append of those records.  `AuditWriter.append` assigns seqs and queues
synchronously before its first checkpoint (tests/brokerd/test_ledger.py holds
it to that), so no other step runs between the read and the queueing: that
holds by construction.  The step then waits, outside the "lock", for the
fsync that covers its records, so concurrent steps share one fsync (group
commit).  No step's caller continues before its own records are durable; a
step whose records cannot be written feeds `AuditFailed`, and its caller gets
`audit_unavailable` instead of what the step would have done.

Steps:
  decide  read the session's taint, decide, append `call` + `decision`
  settle  combine the outcome with the taint *as it is now*, append `result`,
          then (in the background) write the state file
  answer  take a pending approval, re-decide, append `approval` (an approval
          whose deadline has passed is recorded `expired` instead)
plus not_run, expire, requester_gone, declassify, attempt and record (start,
stop, grants).  Once an `approval` record is durable its id is released, to
be drawn again only 2 x ttl later.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from .._error_table import condition, shown
from .._errors import PeerError
from ..policy._decision import Ask
from ..policy._model import GrantState
from ..proto._convert import U64
from ..proto._json import canonical
from ..proto._taint import FAIL_CLOSED, NEW_SESSION, Taint
from ..proto.audit import ApprovalAttempt, Declassify, Event, PasskeyUse, Record
from ..proto.wire import approval_challenge, ts_from_unix
from ._approvals import ApprovalIdsExhausted, PendingApproval, PendingTable
from ._call_events import (
    Approved,
    AuditFailed,
    CallEvent,
    CallRequest,
    Decided,
    Expired,
    HoldApproval,
    NotRun,
    Refused,
    ReleaseApproval,
    Reply,
    RequesterGone,
    SetTaint,
    Settled,
    Step,
    Ticket,
    exhausted,
    too_long_to_record,
    too_many_pending,
    unanswerable,
)
from ._lifecycle import CallLifecycle
from ._policy_link import PolicyLink
from ._state import (
    SessionState,
    StateWriteError,
    ensure_sessions_dir,
    read_state,
    write_state,
)
from .log._audit_writer import AuditUnavailable, AuditWriter
from .runner._spec import RunStatus

log = logging.getLogger("brokerd")


@attrs.define(kw_only=True)
class Opened:
    """A decided call, once its records are durable (or known not to be)."""

    call: CallLifecycle
    reply: Reply
    """Run, pending, denied, or audit_unavailable."""
    approval: PendingApproval | None = None
    """For `pending`: the entry to wait on."""


class NoSuchApproval(PeerError):
    """No pending approval has that id (someone else took it, or it never was)."""

    wire_code = "no_such_approval"


class NoSuchSession(PeerError):
    """brokerd has never seen that session."""

    wire_code = "no_such_session"


def no_such_approval(approval_id: int) -> NoSuchApproval:
    """The error, worded as admin.sock answers it."""
    return NoSuchApproval(f"no pending approval has the id {approval_id}")


def no_such_session(session: str) -> NoSuchSession:
    """The error, worded as admin.sock answers it."""
    return NoSuchSession(f"brokerd has never seen session {session}")


class NotLower(PeerError):
    """A declassify that would raise the taint."""

    wire_code = "not_lower"


@attrs.define
class _Session:
    taint: Taint
    seq: int
    """The seq of the record that last changed the taint (0: none yet)."""
    durable: tuple[Taint, int] | None
    """The newest taint whose record is on disk (what the state file may say)."""
    problem: str | None = None


@attrs.define
class _Commit:
    call: CallLifecycle
    step: Step
    entry: PendingApproval | None = None
    """The approval entry: held after an ask, resolved with the reply after an answer."""
    taint_seq: int | None = None
    """The seq of the result record that sets the taint (SetTaint)."""


class Ledger:
    def __init__(
        self,
        *,
        writer: AuditWriter,
        sessions_dir: Path,
        taints: dict[str, tuple[Taint, int]],
        link: PolicyLink,
        known_sessions: Sequence[str] = (),
        state_fsync: bool = True,
        state_in_thread: bool = True,
        ttl_ms: int = 600_000,
        max_pending: int = 128,
        max_pending_per_session: int = 16,
        clock: Callable[[], float] = trio.current_time,
        wall_clock: Callable[[], float] = time.time,
        format_time: Callable[[float], str] = ts_from_unix,
    ) -> None:
        self.writer = writer
        self.sessions_dir = sessions_dir
        self._sessions: dict[str, _Session] = {
            name: _Session(taint=taint, seq=seq, durable=(taint, seq))
            for name, (taint, seq) in taints.items()
        }
        self._known: set[str] = set(known_sessions) | set(taints)
        self._state_fsync = state_fsync
        self._state_in_thread = state_in_thread
        self._dirty: set[str] = set()
        self._dirty_event = trio.Event()
        self.pending = PendingTable(clock=clock)
        self._clock = clock
        self._link = link
        self._ttl_s = ttl_ms / 1000
        self._max_pending = max_pending
        self._max_pending_per_session = max_pending_per_session
        self._wall_clock = wall_clock
        self._format_time = format_time

    # -- taints

    @property
    def head_seq(self) -> int | None:
        next_seq = self.writer.next_seq
        return next_seq - 1 if next_seq > 0 else None

    def session_count(self) -> int:
        return len(self._known | set(self._sessions))

    def lookup(self, session: str) -> _Session | None:
        """The session's taint: memory first, then its state file (a cache)."""
        entry = self._sessions.get(session)
        if entry is not None:
            return entry
        state: SessionState | None = read_state(self.sessions_dir, session, head_seq=self.head_seq)
        if state is None:
            if session not in self._known:
                return None
            entry = _Session(taint=NEW_SESSION, seq=0, durable=None)  # seen, never raised
            self._sessions[session] = entry
            return entry
        if state.problem is not None:
            log.warning(
                "session %s: state file %s (%s); using secret + untrusted. "
                "See %s",
                session, state.problem, state.detail, condition("broker_state_damaged"),
            )
            entry = _Session(taint=FAIL_CLOSED, seq=0, durable=None, problem=state.problem)
        else:
            entry = _Session(taint=state.taint, seq=state.seq, durable=(state.taint, state.seq))
        self._sessions[session] = entry
        self._known.add(session)
        return entry

    def taint_of(self, session: str) -> Taint:
        entry = self.lookup(session)
        if entry is None:
            entry = _Session(taint=NEW_SESSION, seq=0, durable=None)
            self._sessions[session] = entry
            self._known.add(session)
        return entry.taint

    def _raise_to(self, session: str, taint: Taint, seq: int) -> None:
        entry = self._sessions[session]
        entry.taint, entry.seq = taint, seq

    def _durable(self, session: str, taint: Taint, seq: int) -> None:
        entry = self._sessions[session]
        if entry.durable is None or entry.durable[1] < seq:
            entry.durable = (taint, seq)
            self._dirty.add(session)
            self._dirty_event.set()

    # -- the commit: the only await of a step

    async def _commit(self, commits: Sequence[_Commit], leading: Sequence[Event] = (), *,
                      shield: bool = False) -> tuple[list[Step], AuditUnavailable | None]:
        """Append the steps' records, then carry out their effects, or their failure.

        Returns the step that stands for each commit (its own, or the
        `AuditFailed` one when the records could not be written), and the failure.
        """
        if len(commits) == 1 and not leading:
            events: Sequence[Event] = commits[0].step.records
        else:
            events = [*leading, *(r for c in commits for r in c.step.records)]
        try:
            if shield:
                with trio.CancelScope(shield=True):
                    await self.writer.append(events)
            else:
                await self.writer.append(events)
        except AuditUnavailable as exc:
            failed = [c.call.feed(AuditFailed(message=shown(str(exc), exc))) for c in commits]
            for commit, step in zip(commits, failed, strict=True):
                if commit.entry is not None and _answers(commit.step):
                    self._resolve(commit.entry, step)
                elif commit.entry is not None and _holds(commit.step):
                    self.pending.unreserve(commit.entry)  # it never waits
            return failed, exc
        for commit in commits:
            commit.call.recorded()
            if commit.step.effects:
                self._carry_out(commit)
        return [c.step for c in commits], None

    def _carry_out(self, commit: _Commit) -> None:
        """The ledger's own effects; an answered approval's reply goes to its waiter."""
        for effect in commit.step.effects:
            if isinstance(effect, HoldApproval) and commit.entry is not None:
                self.pending.add(commit.entry)
            elif isinstance(effect, ReleaseApproval):
                self.pending.release(effect.approval_id, effect.hold_s)
                if commit.entry is not None:
                    self._resolve(commit.entry, commit.step)
            elif isinstance(effect, SetTaint) and commit.taint_seq is not None:
                self._durable(effect.session, effect.taint, commit.taint_seq)

    @staticmethod
    def _resolve(entry: PendingApproval, step: Step) -> None:
        reply = step.reply
        if reply is not None and not entry.answered:
            entry.resolve(reply)

    # -- steps (each: a synchronous `_…_now`, then `_commit`)

    async def record(self, events: Sequence[Event]) -> list[Record]:
        """Append events that change no taint (start, stop, grants)."""
        return await self.writer.append(events)

    async def decide(self, request: CallRequest, grants: GrantState, *,
                     leading: Sequence[Event] = (), too_long: str | None = None) -> Opened:
        """Read the taint, decide, append `call` + `decision` (after `leading`).

        `too_long`: why brokerd denies the call `bad_args` itself, before the
        policy (arguments too long to record; `bounded_request`).  The reply is
        `audit_unavailable` when nothing was recorded; then nothing may run and
        nobody is answered as if recorded.
        """
        commit = self._decide_now(request, grants, leading, too_long)
        (step,), failure = await self._commit([commit], leading)
        return Opened(call=commit.call, reply=_reply_of(step),
                      approval=commit.entry if failure is None else None)

    def _decide_now(self, request: CallRequest, grants: GrantState, leading: Sequence[Event],
                    too_long: str | None) -> _Commit:
        taint = self.taint_of(request.session)
        ruled = (self._link.decide(request.tool, request.args, taint, grants)
                 if too_long is None else
                 too_long_to_record(request.tool, too_long, taint, grants.digest))
        call = CallLifecycle(self.writer.next_seq + len(leading), request)
        ticket: Ticket | None = None
        entry: PendingApproval | None = None
        if isinstance(ruled, Ask):
            full = self.pending.no_room(request.session, total=self._max_pending,
                                        per_session=self._max_pending_per_session)
            if full is not None:
                ruled = too_many_pending(ruled, full)
        if isinstance(ruled, Ask):
            try:
                ticket, shown = self._ticket(call, ruled)
            except ApprovalIdsExhausted as exc:
                ruled = exhausted(ruled, str(exc))
            else:
                entry = PendingApproval(call=call, ticket=ticket, args=shown, state=taint)
                self.pending.reserve(entry)
        step = call.feed(Decided(verdict=ruled, taint=taint, grants_digest=grants.digest,
                                 ticket=ticket))
        return _Commit(call=call, step=step, entry=entry)

    def _ticket(self, call: CallLifecycle, asked: Ask) -> tuple[Ticket, dict[str, Any]]:
        """Draw the approval's id, times and challenge.  Raises ApprovalIdsExhausted."""
        approval_id = self.pending.new_id()
        request = call.request
        now_wall = self._wall_clock()
        expires_at = self._format_time(now_wall + self._ttl_s)
        shown = canonical(request.args)
        nonce = secrets.token_hex(16)
        challenge = approval_challenge(
            approval_id=approval_id, call=call.call_id, session=request.session,
            tool=request.tool, args=shown, expires_at=expires_at, nonce=nonce)
        return Ticket(approval_id=approval_id, grant=asked.grant,
                      requested_at=self._format_time(now_wall), expires_at=expires_at,
                      deadline=self._clock() + self._ttl_s, ttl_s=self._ttl_s,
                      challenge=challenge, nonce=nonce), shown

    async def settle(self, call: CallLifecycle, status: RunStatus,
                     output: dict[str, Any] | None, message: str | None, *,
                     runbook: str | None = None,
                     source: dict[str, Any] | None = None) -> Reply | None:
        """Record the result; a call that ran raises the taint as it is now.

        The reply is its answer; None when the runtime's output breaks the
        `result` answer's rules (a runtime's bug: recorded, answered by nobody)."""
        commit = self._settle_now(call, status, output, message, runbook=runbook,
                                  source=source)
        (step,), _ = await self._commit([commit])
        return step.reply

    async def not_run(self, call: CallLifecycle, reason: str) -> Reply:
        """Record that an allowed call never got a run slot (runner_unavailable)."""
        commit = self._settle_now(call, "runner_unavailable", None, reason, slot=False)
        (step,), _ = await self._commit([commit])
        return _reply_of(step)

    def _settle_now(self, call: CallLifecycle, status: RunStatus,
                    output: dict[str, Any] | None, message: str | None, *,
                    slot: bool = True, runbook: str | None = None,
                    source: dict[str, Any] | None = None) -> _Commit:
        session = call.request.session
        taint = self.taint_of(session)
        event: CallEvent = (Settled(status=status, output=output, message=message, taint=taint,
                                    runbook=runbook, source=source)
                            if slot else NotRun(reason=message or "", taint=taint))
        step = call.feed(event)
        seq = self.writer.next_seq
        for effect in step.effects:
            if isinstance(effect, SetTaint):  # raised now: the next decision sees it
                self._raise_to(session, effect.taint, seq)
        return _Commit(call=call, step=step, taint_seq=seq)

    def session_taint(self, call: CallLifecycle) -> Taint:
        """The session's taint now (after a settle: what the call left it at)."""
        return self.taint_of(call.request.session)

    async def answer(self, approval_id: int, grants: GrantState, *, by: int,
                     refused: str | None = None, refuse: bool = False,
                     passkey: PasskeyUse | None = None) -> None:
        """approve/refuse: take the entry, re-decide (approve), record, answer its waiter.

        `refuse` with its `refused` reason, else an approval (with the verified
        `passkey` that approved it, kept in the record).  An approval whose
        deadline has passed (the sweep had not got to it yet) is not answered:
        it is recorded `expired`, its waiter is denied expired, and the owner
        gets NoSuchApproval.

        Raises NoSuchApproval, or AuditUnavailable (the waiter is then
        answered audit_unavailable too).
        """
        entry = self.pending.take(approval_id)
        if entry is None:
            raise no_such_approval(approval_id)
        if entry.expired_at(self._clock()):
            await self.expire([entry])
            raise no_such_approval(approval_id)
        try:
            commit = self._answer_now(entry, grants, by=by, refused=refused, refuse=refuse,
                                      passkey=passkey)
            # Taken: it is answered, whatever happens here (shielded).
            _, failure = await self._commit([commit], shield=True)
        except BaseException:
            if not entry.answered:  # our bug: the waiter is not left hanging
                entry.resolve(unanswerable(entry.grant))
            raise
        if failure is not None:
            raise failure

    def _answer_now(self, entry: PendingApproval, grants: GrantState, *, by: int,
                    refused: str | None, refuse: bool, passkey: PasskeyUse | None) -> _Commit:
        call = entry.call
        event: CallEvent
        if refuse:
            event = Refused(by=by, reason=refused)
        else:
            asked = call.verdict
            if not isinstance(asked, Ask):  # pragma: no cover - pending means asked
                raise TypeError("a pending call without its ask")
            taint = self.taint_of(entry.session)
            event = Approved(redecision=self._link.redecide(asked, taint, grants),
                             taint=taint, by=by, passkey=passkey)
        return _Commit(call=call, step=call.feed(event), entry=entry)

    async def expire(self, entries: list[PendingApproval], *, reason: str | None = None) -> None:
        """Record `expired` for entries already taken out; answer them denied expired."""
        if not entries:
            return
        commits = [_Commit(call=e.call, step=e.call.feed(Expired(reason=reason)), entry=e)
                   for e in entries]
        # Taken out already: shielded, so that a cancelled sweep still answers them.
        await self._commit(commits, shield=True)

    async def requester_gone(self, approval_id: int) -> bool:
        """loopd went away while its call waited: withdraw and record it, now.

        False when someone else took the approval first.  Raises AuditUnavailable.
        """
        entry = self.pending.take(approval_id)
        if entry is None:
            return False
        if entry.expired_at(self._clock()):
            await self.expire([entry])
            return True
        commit = _Commit(call=entry.call, step=entry.call.feed(RequesterGone()), entry=entry)
        _, failure = await self._commit([commit])
        if failure is not None:
            raise failure
        return True

    async def attempt(self, approval_id: int | None, *, by: int, reason: str) -> None:
        """Record a refused approve, declassify or passkey change (`approval_attempt`)."""
        await self.writer.append([ApprovalAttempt(
            approval_id=U64(approval_id) if approval_id is not None else None, by=U64(by),
            reason=reason)])

    async def declassify(self, session: str, *, to: Taint, by: int, reason: str) -> None:
        """Lower a session's taint (the owner).  Raises NoSuchSession, NotLower."""
        entry = self.lookup(session)
        if entry is None:
            raise no_such_session(session)
        current = entry.taint
        if not to.is_lower_or_equal(current):
            raise NotLower("a declassify may only lower the taint (label down, untrusted "
                           "cleared)")
        seq = self.writer.next_seq
        self._raise_to(session, to, seq)
        entry.problem = None
        await self.writer.append(
            [Declassify(session=session, from_=current, to=to, by=U64(by), reason=reason)]
        )
        self._durable(session, to, seq)

    def session_view(self, session: str) -> tuple[Taint, int] | None:
        entry = self.lookup(session)
        if entry is None:
            return None
        return entry.taint, entry.seq

    # -- the state files, written behind the log

    def _write_one(self, session: str) -> None:
        entry = self._sessions.get(session)
        if entry is None or entry.durable is None:
            return
        taint, seq = entry.durable
        try:
            ensure_sessions_dir(self.sessions_dir)
            write_state(self.sessions_dir, session, taint, seq, fsync=self._state_fsync)
        except (StateWriteError, OSError) as exc:
            log.warning("state file not written: %s (the audit log has the taint)", exc)

    async def flush_states(self) -> None:
        """Write every state file that is behind the log."""
        while self._dirty:
            sessions = sorted(self._dirty)
            self._dirty.clear()
            for session in sessions:
                if self._state_in_thread:
                    await trio.to_thread.run_sync(self._write_one, session)
                else:
                    self._write_one(session)

    async def run_state_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Background task: state files follow the log (each after its record)."""
        task_status.started()
        while True:
            await self._dirty_event.wait()
            self._dirty_event = trio.Event()
            with trio.CancelScope(shield=True):
                await self.flush_states()


def _answers(step: Step) -> bool:
    """The step answers a pending approval (its waiter is resolved with the reply)."""
    return any(isinstance(e, ReleaseApproval) for e in step.effects)


def _holds(step: Step) -> bool:
    """The step puts a call in the pending table (a decision `ask`)."""
    return any(isinstance(e, HoldApproval) for e in step.effects)


def _reply_of(step: Step) -> Reply:
    if step.reply is None:  # pragma: no cover - every decision and result has a reply
        raise AssertionError("a step without its reply")
    return step.reply
