"""The pending table (05-brokerd "Approvals").

States of one entry, and every transition (nothing else moves an entry):

    pending --take(id) by approve/refuse--> answered (approved | refused)
    pending --take_expired(now) by sweep--> answered (expired)
    pending --take(id) by its requester---> answered (requester_gone)
    pending --take_all() at shutdown------> answered (expired, reason shutdown)

Whoever takes an entry out of the table answers it (`resolve`), so an entry is
never answered twice and a second taker finds nothing.  Taking is synchronous
(no checkpoint), so in trio it is atomic.

Approval ids are six-digit numbers drawn with `secrets`, never reused while
brokerd runs.  The expiry sweep is one task whose cancel scope has the earliest
expiry as its deadline.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import attrs
import trio

from ..proto._taint import Taint

ID_LOW = 100_000
ID_HIGH = 999_999

VerdictKind = Literal["approved", "refused", "expired", "requester_gone"]


class ApprovalIdsExhausted(Exception):
    """Every six-digit id has been used since brokerd started."""


@attrs.frozen(kw_only=True)
class Answer:
    """How a waiting call ends: run it (approved and still allowed), or be denied/failed."""

    run: bool
    denied_code: str | None = None
    """`refused`, `expired`, `changed`, `grants_invalid` ... when the call is denied."""
    denied_reason: str | None = None
    error_code: str | None = None
    """`audit_unavailable` when the approval could not be recorded."""
    decision: Any = None
    """The re-decision (a policy Decision) that lets the call run."""


@attrs.define(eq=False, kw_only=True)
class PendingApproval:
    """One call waiting for the owner."""

    approval_id: int
    call_id: int
    session: str
    tool: str
    args: dict[str, Any]
    grant: str | None
    state: Taint
    requested_at: str
    expires_at: str
    deadline: float
    """trio time of the expiry."""
    ask: Any
    """The policy's Ask, for `redecide`."""
    challenge: bytes = b""
    """What a passkey signs to approve exactly this call (11-approvals-web)."""
    _done: trio.Event = attrs.field(factory=trio.Event)
    _answer: Answer | None = None

    def resolve(self, answer: Answer) -> None:
        """Called once, by whoever took the entry."""
        if self._answer is not None:  # pragma: no cover - our own bug
            raise AssertionError(f"approval {self.approval_id} answered twice")
        self._answer = answer
        self._done.set()

    @property
    def answered(self) -> bool:
        return self._answer is not None

    async def wait(self) -> Answer:
        await self._done.wait()
        assert self._answer is not None
        return self._answer


class PendingTable:
    def __init__(self, *, rng: Callable[[int], int] = secrets.randbelow) -> None:
        self._entries: dict[int, PendingApproval] = {}
        self._used: set[int] = set()
        self._rng = rng
        self._changed = trio.Event()

    def new_id(self) -> int:
        """An unpredictable six-digit id never used before in this run."""
        span = ID_HIGH - ID_LOW + 1
        if len(self._used) >= span:
            raise ApprovalIdsExhausted("every six-digit approval id has been used")
        while True:
            candidate = ID_LOW + self._rng(span)
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate

    def add(self, entry: PendingApproval) -> None:
        if entry.approval_id in self._entries:  # pragma: no cover - our own bug
            raise AssertionError("approval id in use")
        self._used.add(entry.approval_id)
        self._entries[entry.approval_id] = entry
        self._poke()

    def get(self, approval_id: int) -> PendingApproval | None:
        return self._entries.get(approval_id)

    def take(self, approval_id: int) -> PendingApproval | None:
        """Take the entry out (to answer it), or None if someone else has."""
        entry = self._entries.pop(approval_id, None)
        if entry is not None:
            self._poke()
        return entry

    def take_expired(self, now: float) -> list[PendingApproval]:
        expired = [e for e in self._entries.values() if e.deadline <= now]
        for entry in expired:
            del self._entries[entry.approval_id]
        if expired:
            self._poke()
        return expired

    def take_all(self) -> list[PendingApproval]:
        entries = list(self._entries.values())
        self._entries.clear()
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
