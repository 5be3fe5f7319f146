"""The pending table (05-brokerd "Approvals").

The table holds the calls in the `pending` state of `_lifecycle.TRANSITIONS`;
what moves them out (approved, refused, expired, requester gone) is that table.
Whoever takes an entry out of this table feeds its event and answers it
(`resolve`) with the reply the step returned, so an entry is never answered
twice and a second taker finds nothing.  Taking is synchronous (no
checkpoint), so in trio it is atomic.

Approval ids are six-digit numbers drawn with `secrets`.  An id is held from
the moment it is drawn until 2 x ttl after its approval record is durable
(`release`), so an id still on the owner's screen never names another call;
only then may it be drawn again.  When every id is held, `new_id` raises
`ApprovalIdsExhausted` (the ledger records the call and denies it
`approvals_exhausted`).  The expiry sweep is one task whose cancel scope has
the earliest expiry as its deadline; the owner's answer checks the deadline
too (`expired_at`), since a slow sweep may leave an expired entry in the table.
"""

from __future__ import annotations

import array
import math
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .._errors import UnavailableError
from ..proto._taint import Taint
from ._call_events import Reply, Ticket
from ._lifecycle import CallLifecycle

ID_LOW = 100_000
ID_HIGH = 999_999
ID_SPAN = ID_HIGH - ID_LOW + 1


_RANDOM_TRIES = 64
"""Random draws before a crowded table walks to the next free id instead."""


class ApprovalIdsExhausted(UnavailableError):
    """Every six-digit id is pending, or held for 2 x ttl after its answer."""

    runbook = "docs/runbook.md#approvals-exhausted"


@attrs.define(eq=False, kw_only=True)
class PendingApproval:
    """One call waiting for the owner: its lifecycle (`_lifecycle`), and its waiter."""

    call: CallLifecycle
    ticket: Ticket
    args: dict[str, Any]
    """The arguments as the owner is shown them (canonical)."""
    state: Taint
    """The session's taint at the decision."""
    _done: trio.Event = attrs.field(factory=trio.Event)
    _reply: Reply | None = None

    @property
    def approval_id(self) -> int:
        return self.ticket.approval_id

    @property
    def call_id(self) -> int:
        return self.call.call_id

    @property
    def session(self) -> str:
        return self.call.request.session

    @property
    def tool(self) -> str:
        return self.call.request.tool

    @property
    def grant(self) -> str:
        return self.ticket.grant

    @property
    def requested_at(self) -> str:
        return self.ticket.requested_at

    @property
    def expires_at(self) -> str:
        return self.ticket.expires_at

    @property
    def deadline(self) -> float:
        """trio time of the expiry."""
        return self.ticket.deadline

    @property
    def challenge(self) -> bytes:
        return self.ticket.challenge

    def resolve(self, reply: Reply) -> None:
        """Called once, by whoever took the entry, with the reply its step returned."""
        if self._reply is not None:  # pragma: no cover - our own bug
            raise AssertionError(f"approval {self.approval_id} answered twice")
        self._reply = reply
        self._done.set()

    @property
    def answered(self) -> bool:
        return self._reply is not None

    def expired_at(self, now: float) -> bool:
        """The deadline has passed (the sweep may not have got to it yet)."""
        return self.deadline <= now

    async def wait(self) -> Reply:
        """`Run`, or the denial or error that ends the call."""
        await self._done.wait()
        if self._reply is None:  # pragma: no cover - set together with the event
            raise AssertionError("approval answered without a reply")
        return self._reply


_FREE, _PENDING, _RESTING = 0, 1, 2
"""The state of one id: may be drawn; drawn and not yet released; resting after its record."""


class PendingTable:
    def __init__(self, *, rng: Callable[[int], int] = secrets.randbelow,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self._entries: dict[int, PendingApproval] = {}
        self._state = bytearray(ID_SPAN)
        """The state of each id (index: id - ID_LOW); 900 kB whatever happens."""
        self._held = 0
        """How many ids are not `_FREE`."""
        self._rest_until = array.array("d")
        self._rest_index = array.array("l")
        """A queue of (time the rest ends, id index) of resting ids, oldest first.  The
        hold is 2 x ttl, fixed for a run, so the times only grow; were one out of
        order, the ids behind it would only rest longer."""
        self._rest_head = 0
        self._rng = rng
        self._clock = clock
        self._changed = trio.Event()
        self._asking: dict[str, int] = {}
        """Asks per session, from `reserve` (or `add`) until their entry leaves the table."""
        self._counted: set[int] = set()
        """The approval ids those counts are made of."""

    def new_id(self) -> int:
        """An unpredictable six-digit id that no held approval has.

        Raises ApprovalIdsExhausted when every id is pending or resting.
        """
        self._wake_rested()
        if self._held >= ID_SPAN:
            raise ApprovalIdsExhausted(
                f"all {ID_SPAN} approval ids are pending or were answered within 2 x ttl_ms")
        state = self._state
        index = self._rng(ID_SPAN)
        tries = 1
        while state[index] != _FREE and tries < _RANDOM_TRIES:
            index = self._rng(ID_SPAN)
            tries += 1
        if state[index] != _FREE:  # crowded: the next free id after a random one
            found = state.find(_FREE, index)
            index = found if found >= 0 else state.find(_FREE)
        state[index] = _PENDING
        self._held += 1
        return ID_LOW + index

    def release(self, approval_id: int, hold_s: float) -> None:
        """The approval's record is durable: the id may be drawn again `hold_s` from now."""
        index = approval_id - ID_LOW
        if 0 <= index < ID_SPAN and self._state[index] == _PENDING:
            self._state[index] = _RESTING
            self._rest_until.append(self._clock() + hold_s)
            self._rest_index.append(index)

    def held(self) -> int:
        """How many ids may not be drawn now."""
        self._wake_rested()
        return self._held

    def _wake_rested(self) -> None:
        head = self._rest_head
        if head >= len(self._rest_until):
            return
        now = self._clock()
        until, indexes, state = self._rest_until, self._rest_index, self._state
        while head < len(until) and until[head] <= now:
            state[indexes[head]] = _FREE
            self._held -= 1
            head += 1
        if head > 4096 and head * 2 > len(until):
            del until[:head]
            del indexes[:head]
            head = 0
        self._rest_head = head

    def no_room(self, session: str, *, total: int, per_session: int) -> str | None:
        """Why one more ask of `session` may not wait (issue 22 item 9), or None."""
        if self._asking.get(session, 0) >= per_session:
            return (f"session {session} already has {per_session} calls waiting for the "
                    "owner ([approvals] max_pending_per_session)")
        if len(self._counted) >= total:
            return (f"{total} calls are already waiting for the owner "
                    "([approvals] max_pending)")
        return None

    def reserve(self, entry: PendingApproval) -> None:
        """An ask is decided: it counts from now, before its records are durable and it
        is added, so that concurrent asks cannot all pass `no_room`."""
        if entry.approval_id not in self._counted:
            self._counted.add(entry.approval_id)
            self._asking[entry.session] = self._asking.get(entry.session, 0) + 1

    def unreserve(self, entry: PendingApproval) -> None:
        """A counted ask leaves: its entry was taken out, or never went in."""
        if entry.approval_id not in self._counted:
            return
        self._counted.discard(entry.approval_id)
        left = self._asking[entry.session] - 1
        if left:
            self._asking[entry.session] = left
        else:
            del self._asking[entry.session]

    def asking(self, session: str | None = None) -> int:
        """Asks counted now: of `session`, or of all sessions."""
        return len(self._counted) if session is None else self._asking.get(session, 0)

    def add(self, entry: PendingApproval) -> None:
        if entry.approval_id in self._entries:  # pragma: no cover - our own bug
            raise AssertionError("approval id in use")
        index = entry.approval_id - ID_LOW
        if 0 <= index < ID_SPAN and self._state[index] == _FREE:
            self._state[index] = _PENDING
            self._held += 1
        self._entries[entry.approval_id] = entry
        self.reserve(entry)
        self._poke()

    def get(self, approval_id: int) -> PendingApproval | None:
        return self._entries.get(approval_id)

    def take(self, approval_id: int) -> PendingApproval | None:
        """Take the entry out (to answer it), or None if someone else has."""
        entry = self._entries.pop(approval_id, None)
        if entry is not None:
            self.unreserve(entry)
            self._poke()
        return entry

    def take_expired(self, now: float) -> list[PendingApproval]:
        expired = [e for e in self._entries.values() if e.deadline <= now]
        for entry in expired:
            del self._entries[entry.approval_id]
            self.unreserve(entry)
        if expired:
            self._poke()
        return expired

    def take_all(self) -> list[PendingApproval]:
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            self.unreserve(entry)
        self._poke()
        return entries

    def items(self) -> list[PendingApproval]:
        """Oldest first (insertion order is request order)."""
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def earliest_deadline(self) -> float:
        return min((e.deadline for e in self._entries.values()), default=math.inf)

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        await self._changed.wait()


async def run_expiry_sweep(
    table: PendingTable,
    expire: Callable[[list[PendingApproval]], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Expire entries on time, forever.

    One cancel scope per round, its deadline the earliest expiry in the table;
    any change to the table wakes the sweep to recompute it.  `expire` records
    and answers the entries it is given (they are already out of the table).
    """
    task_status.started()
    while True:
        with trio.move_on_at(table.earliest_deadline()):
            await table.wait_changed()
        expired = table.take_expired(trio.current_time())
        if expired:
            await expire(expired)
