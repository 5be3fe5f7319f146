"""The ledger (04-audit "The ledger"): the audit writer and the session taints
behind one lock.

The lock is trio's cooperative scheduling itself: every step reads the taints,
decides, and *queues* its records with no checkpoint in between, because
`AuditWriter.append` assigns seqs and queues synchronously before its first
checkpoint (tests/brokerd/test_ledger.py holds it to that).  The step then
waits, outside the "lock", for the fsync that covers its records, so
concurrent steps share one fsync (group commit).  No step's caller continues
before its own records are durable.

Steps:
  decide  read the session's taint, decide, append `call` + `decision`
  settle  combine the outcome with the taint *as it is now*, append `result`,
          then (in the background) write the state file
  answer  take a pending approval, re-decide, append `approval` (an approval
          whose deadline has passed is recorded `expired` instead)
plus declassify, grants, start and stop.  Once an `approval` record is
durable its id is released, to be drawn again only 2 x ttl later.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from .._error_table import condition, see, shown
from .._errors import PeerError
from ..proto._audit import (
    ApprovalRecord,
    BoundedCall,
    DecisionRecord,
    Declassify,
    Event,
    OmittedArgs,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    OutputDigest,
    Peer,
    Record,
    Redecision,
    ResultRecord,
)
from ..proto._audit_passkey import ApprovalAttempt, PasskeyUse
from ..proto._convert import U64, JsonObject
from ..proto._json import canonical, dumps_bytes
from ..proto._taint import FAIL_CLOSED, NEW_SESSION, Label, Taint
from ..proto._wire_passkey import approval_challenge
from ._approvals import Answer, ApprovalIdsExhausted, PendingApproval, PendingTable
from ._audit_writer import AuditUnavailable, AuditWriter
from ._state import (
    SessionState,
    StateWriteError,
    ensure_sessions_dir,
    read_state,
    write_state,
)

log = logging.getLogger("brokerd")

RulingKind = Literal["allowed", "ask", "denied"]


@attrs.frozen(kw_only=True)
class Ruling:
    """What the policy said, in the ledger's terms (built by `_policy_link`)."""

    kind: RulingKind
    code: str | None = None
    reason: str | None = None
    grant: str | None = None
    label: Label = "public"
    """D8's result label (what the call's output is labelled)."""
    untrusted: bool = False
    decision: Any = None
    """The policy's Decision for an allowed call (to build the RunSpec)."""
    ask: Any = None
    """The policy's Ask, for `redecide` at approval time."""


@attrs.frozen(kw_only=True)
class Decided:
    """The outcome of the decide step, once its records are durable."""

    call_id: int
    ruling: Ruling
    taint: Taint
    approval: PendingApproval | None


class NoSuchApproval(PeerError):
    """No pending approval has that id (someone else took it, or it never was)."""


class NoSuchSession(PeerError):
    """brokerd has never seen that session."""


class NotLower(PeerError):
    """A declassify that would raise the taint."""


@attrs.define
class _Session:
    taint: Taint
    seq: int
    """The seq of the record that last changed the taint (0: none yet)."""
    durable: tuple[Taint, int] | None
    """The newest taint whose record is on disk (what the state file may say)."""
    problem: str | None = None


def output_digest(output: dict[str, Any] | None) -> OutputDigest | None:
    """{sha256, bytes} of the answer's output, as it is sent (compact JSON)."""
    if output is None:
        return None
    data = dumps_bytes(output)
    return OutputDigest(sha256=hashlib.sha256(data).hexdigest(), bytes=U64(len(data)))


StateWriter = Callable[[Path, str, Taint, int], None]

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


def args_size(args: dict[str, Any]) -> tuple[int, bytes]:
    """The UTF-8 length of the canonical arguments, and those bytes."""
    data = dumps_bytes(canonical(args))
    return len(data), data


def omitted_args(data: bytes) -> OmittedArgs:
    return OmittedArgs(bytes=U64(len(data)), sha256=hashlib.sha256(data).hexdigest())


class Ledger:
    def __init__(
        self,
        *,
        writer: AuditWriter,
        sessions_dir: Path,
        taints: dict[str, tuple[Taint, int]],
        known_sessions: Sequence[str] = (),
        state_fsync: bool = True,
        state_in_thread: bool = True,
        clock: Callable[[], float] = trio.current_time,
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

    # -- steps

    async def record(self, events: Sequence[Event]) -> list[Record]:
        """Append events that change no taint (start, stop, grants)."""
        return await self.writer.append(events)

    async def decide(
        self,
        *,
        session: str,
        tool: str,
        args: dict[str, Any],
        peer_uid: int,
        peer_pid: int,
        rule: Callable[[Taint], Ruling],
        grants_digest: str,
        leading: Sequence[Event] = (),
        ttl_ms: int,
        wall_now: Callable[[], float],
        format_time: Callable[[float], str],
        omitted: OmittedArgs | None = None,
    ) -> Decided:
        """Read the taint, decide (`rule`), append `call` + `decision` (after `leading`).

        `omitted`: the arguments are too long to record; the `call` record
        carries `{}` and their size and hash instead.

        Raises AuditUnavailable; then nothing may run and nobody is answered
        as if recorded.
        """
        taint = self.taint_of(session)
        ruling = rule(taint)
        call_id = self.writer.next_seq + len(leading)
        approval: PendingApproval | None = None
        approval_id: int | None = None
        if ruling.kind == "ask":
            try:
                approval_id = self.pending.new_id()
            except ApprovalIdsExhausted as exc:
                ruling = Ruling(kind="denied", code="approvals_exhausted", grant=ruling.grant,
                                reason=f"no approval id is free ({exc}); answer the pending "
                                f"approvals or wait. {see(exc)}")
        if ruling.kind == "allowed":
            outcome: OutcomeAllowed | OutcomeAsk | OutcomeDenied = OutcomeAllowed()
        elif ruling.kind == "ask":
            assert approval_id is not None
            now_wall = wall_now()
            expires_at = format_time(now_wall + ttl_ms / 1000)
            shown_args = canonical(args)
            approval = PendingApproval(
                approval_id=approval_id, call_id=call_id, session=session, tool=tool,
                args=shown_args, grant=ruling.grant, state=taint,
                requested_at=format_time(now_wall), expires_at=expires_at,
                deadline=self._clock() + ttl_ms / 1000, ttl_s=ttl_ms / 1000, ask=ruling.ask,
                challenge=approval_challenge(
                    approval_id=approval_id, call=call_id, session=session, tool=tool,
                    args=shown_args, expires_at=expires_at, nonce=secrets.token_hex(16)),
            )
            outcome = OutcomeAsk(approval_id=U64(approval_id), expires_at=approval.expires_at)
        else:
            assert ruling.code is not None and ruling.reason is not None
            outcome = OutcomeDenied(code=ruling.code,  # type: ignore[arg-type]
                                    reason=bound_reason(ruling.reason))
        events: list[Event] = [
            *leading,
            BoundedCall(session=session, tool=tool,
                        args=JsonObject({} if omitted is not None else args),
                        peer=Peer(uid=U64(peer_uid), pid=U64(peer_pid)), omitted=omitted),
            DecisionRecord(call=U64(call_id), outcome=outcome, grant=ruling.grant, state=taint,
                           grants_digest=grants_digest),
        ]
        records = await self.writer.append(events)
        assert records[len(leading)].seq == call_id
        if approval is not None:
            self.pending.add(approval)
        return Decided(call_id=call_id, ruling=ruling, taint=taint, approval=approval)

    async def settle(
        self,
        *,
        call_id: int,
        session: str,
        status: str,
        label: Label,
        untrusted: bool,
        output: dict[str, Any] | None,
    ) -> Taint:
        """Record the result; a call that ran raises the taint as it is now.

        Returns the session's taint after the call.  Raises AuditUnavailable.
        """
        ran = status in ("ok", "tool_failed", "timeout")
        now = self.taint_of(session)
        after = now.raised_by(label, untrusted) if ran else now
        seq = self.writer.next_seq
        changed = after != now
        if changed:
            self._raise_to(session, after, seq)
        event = ResultRecord(
            call=U64(call_id), status=status, label=label,  # type: ignore[arg-type]
            untrusted=untrusted, state=after, output=output_digest(output) if ran else None,
        )
        await self.writer.append([event])
        if changed:
            self._durable(session, after, seq)
        return after

    def _verdict(
        self,
        entry: PendingApproval,
        verdict: Literal["approved", "refused"],
        reason: str | None,
        redecide: Callable[[PendingApproval, Taint], Ruling],
    ) -> tuple[Redecision | None, Answer]:
        """The re-decision (for an approval) and how the waiting call ends."""
        if verdict == "refused":
            why = f"refused by the owner{': ' + reason if reason else ''}"
            return None, Answer(run=False, denied_code="refused", denied_reason=why)
        taint = self.taint_of(entry.session)
        ruling = redecide(entry, taint)
        if ruling.kind == "allowed":
            allowed = Redecision(outcome=OutcomeAllowed(), grant=ruling.grant, state=taint)
            return allowed, Answer(run=True, decision=ruling)
        assert ruling.code is not None and ruling.reason is not None
        outcome = OutcomeDenied(code=ruling.code,  # type: ignore[arg-type]
                                reason=bound_reason(ruling.reason))
        denied = Redecision(outcome=outcome, grant=ruling.grant, state=taint)
        return denied, Answer(run=False, denied_code=ruling.code, denied_reason=ruling.reason)

    async def answer(
        self,
        approval_id: int,
        *,
        verdict: Literal["approved", "refused"],
        by: int,
        reason: str | None,
        redecide: Callable[[PendingApproval, Taint], Ruling],
        passkey: PasskeyUse | None = None,
    ) -> None:
        """approve/refuse: take the entry, re-decide (approve), record, answer its waiter.

        `passkey` is the verified assertion that approved it (kept in the record).

        An approval whose deadline has passed (the sweep had not got to it
        yet) is not answered: it is recorded `expired`, its waiter is denied
        expired, and the owner gets NoSuchApproval.

        Raises NoSuchApproval, or AuditUnavailable (the waiter is then
        answered audit_unavailable too).
        """
        entry = self.pending.take(approval_id)
        if entry is None:
            raise NoSuchApproval(approval_id)
        if entry.expired_at(self._clock()):
            await self.expire([entry])
            raise NoSuchApproval(approval_id)
        try:
            redecision, answer = self._verdict(entry, verdict, reason, redecide)
            event = ApprovalRecord(
                call=U64(entry.call_id), approval_id=U64(entry.approval_id), verdict=verdict,
                by=U64(by), reason=reason, redecision=redecision, passkey=passkey,
            )
            with trio.CancelScope(shield=True):  # taken: it is answered, whatever happens here
                await self.writer.append([event])
        except AuditUnavailable as exc:
            entry.resolve(Answer(run=False, error_code="audit_unavailable",
                                 denied_reason=shown(str(exc), exc)))
            raise
        except BaseException:
            if not entry.answered:  # our bug: the waiter is not left hanging
                entry.resolve(Answer(run=False, denied_code="expired",
                                     denied_reason="brokerd could not answer this approval"))
            raise
        self._release(entry)
        entry.resolve(answer)

    def _release(self, entry: PendingApproval) -> None:
        """The approval record is durable: the id rests for 2 x ttl, then may be drawn."""
        self.pending.release(entry.approval_id, 2 * entry.ttl_s)

    async def expire(self, entries: list[PendingApproval], *, reason: str | None = None) -> None:
        """Record `expired` for entries already taken out; answer them denied expired."""
        if not entries:
            return
        events: list[Event] = [
            ApprovalRecord(call=U64(e.call_id), approval_id=U64(e.approval_id), verdict="expired",
                           by=None, reason=reason, redecision=None)
            for e in entries
        ]
        why = "the approval expired" if reason is None else f"the approval expired ({reason})"
        try:
            # Taken out already: shielded, so that a cancelled sweep still answers them.
            with trio.CancelScope(shield=True):
                await self.writer.append(events)
        except AuditUnavailable as exc:
            for entry in entries:
                entry.resolve(Answer(run=False, error_code="audit_unavailable",
                                     denied_reason=shown(str(exc), exc)))
            return
        for entry in entries:
            self._release(entry)
            entry.resolve(Answer(run=False, denied_code="expired", denied_reason=why))

    async def requester_gone(self, approval_id: int) -> bool:
        """loopd went away while its call waited: withdraw and record it, now.

        False when someone else took the approval first.
        """
        entry = self.pending.take(approval_id)
        if entry is None:
            return False
        if entry.expired_at(self._clock()):
            await self.expire([entry])
            return True
        event = ApprovalRecord(
            call=U64(entry.call_id), approval_id=U64(entry.approval_id),
            verdict="requester_gone", by=None, reason="the requester closed its connection",
            redecision=None,
        )
        try:
            await self.writer.append([event])
            self._release(entry)
        finally:
            entry.resolve(Answer(run=False, denied_code="expired",
                                 denied_reason="the requester went away"))
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
            raise NoSuchSession(session)
        current = entry.taint
        if not to.is_lower_or_equal(current):
            raise NotLower(session)
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
