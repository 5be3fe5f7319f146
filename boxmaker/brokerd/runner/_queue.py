"""Bounded work per call (issue 11): at most `max_concurrent` tools run at once.

Calls beyond that wait in a first-come queue of at most `max_queued`, each at
most `timeout_s`.  A call that finds the queue full, or waits past the
timeout, gets `RunnerBusy` ("too many calls at once"): nothing runs, and
brokerd records and answers `runner_unavailable`.  A waiter that is cancelled
(its requester went away) leaves the queue and never runs.

A finished call hands its slot straight to the oldest waiter, so a call that
arrives later can never overtake one that waits.  Synchronous bookkeeping
between checkpoints: in trio that is atomic.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ..._errors import UnavailableError


class RunnerBusy(UnavailableError):
    """The call may not run now: every slot is taken and the queue is full, or the
    wait was too long.  The message says which."""


class RunQueue:
    def __init__(self, *, max_concurrent: int, max_queued: int, timeout_s: float) -> None:
        if max_concurrent < 1 or max_queued < 0 or not timeout_s > 0:  # pragma: no cover
            raise ValueError("max_concurrent >= 1, max_queued >= 0 and timeout_s > 0")
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.timeout_s = timeout_s
        self._running = 0
        self._waiters: collections.deque[trio.Event] = collections.deque()
        self.peak_running = 0
        """The most calls that ever ran at once (for status and tests)."""

    @property
    def running(self) -> int:
        return self._running

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def try_acquire(self) -> bool:
        """Take a slot at once when one is free and nobody waits (no checkpoint)."""
        if self._running < self.max_concurrent and not self._waiters:
            self._running += 1
            self.peak_running = max(self.peak_running, self._running)
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a slot.  Raises RunnerBusy; a cancelled waiter leaves the queue."""
        await trio.lowlevel.checkpoint()  # before taking a slot: a cancel here loses none
        if self.try_acquire():
            return
        if len(self._waiters) >= self.max_queued:
            raise RunnerBusy(
                f"too many calls at once ({self.max_concurrent} running, "
                f"{len(self._waiters)} waiting)")
        turn = trio.Event()
        self._waiters.append(turn)
        try:
            with trio.move_on_after(self.timeout_s):
                await turn.wait()
        except BaseException:
            self._give_up(turn)
            raise
        if turn.is_set():
            return  # the slot was handed over
        self._give_up(turn)
        raise RunnerBusy(
            f"too many calls at once (waited {self.timeout_s:g} s for one of "
            f"{self.max_concurrent} slots)")

    def _give_up(self, turn: trio.Event) -> None:
        if turn.is_set():  # handed a slot just as it gave up: pass it on
            self.release()
        else:
            self._waiters.remove(turn)

    def release(self) -> None:
        """A call finished: its slot goes to the oldest waiter, or becomes free."""
        if self._waiters:
            self._waiters.popleft().set()
            return
        self._running -= 1

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()
