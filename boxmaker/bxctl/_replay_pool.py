"""Re-deciding a long history on a second core (`bxctl grants replay`).

Reading and verifying the log takes one core; cutting each call out of its
lines and deciding it takes most of another.  For a big log
(`PARALLEL_MIN_BYTES`), `DecidePool` hands the `call` and `decision` lines the
verifier has taken in (their bytes, as verified: the worker never reads the
log itself) in batches to one worker process, forked with the compiled grant
set, the protected paths and the `--since` filter already in memory (a fork
does not pickle `initargs`), while the reading and verifying go on.  The
worker runs the same `HistoryReader` and the same pure `Redecider`
(`boxmaker.policy`) as a replay on one core, tallies each batch, and sends
back only its counts and its changed calls, in the order they were read; so
what replay prints is the same as without it (tests run both).  It does no
I/O of its own.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Final

from ..policy._decision import ProtectedPaths
from ..policy._model import GrantSet
from ..policy._replay import Change, Redecider, ReplayTally
from ..proto.audit import HistoryCall, HistoryReader, LineFacts

PARALLEL_MIN_BYTES: Final = 16 * 1024 * 1024
BATCH: Final = 8192
"""Lines per batch (a `call` and its `decision` are two)."""
IN_FLIGHT: Final = 4

Keep = Callable[[HistoryCall], bool]
_Batch = tuple[bytes, list[int]]
"""Verified lines joined by ``\n`` (a line's bytes never hold one), and for each its
`LineFacts` as one number: the seq of a `call`, ``~call`` for a `decision` (so < 0)."""
_Answer = tuple[ReplayTally, list[Change]]


class _Worker:
    """The worker's reader, redecider and the tally of the batch at hand."""

    def __init__(self, grants: GrantSet, protected: ProtectedPaths, keep: Keep | None) -> None:
        self.decide = Redecider(grants, protected).decide
        self.keep = keep
        self.reader = HistoryReader(self.on_call)
        self.tally = ReplayTally()
        self.changes: list[Change] = []

    def on_call(self, call: HistoryCall) -> None:
        if self.keep is None or self.keep(call):
            change = self.tally.add(call, self.decide(call.tool, call.args_text, call.state))
            if change is not None:
                self.changes.append(change)

    def batch(self, batch: _Batch) -> _Answer:
        self.tally = ReplayTally()
        self.changes = []
        feed_call = self.reader.feed_call
        feed_decision = self.reader.feed_decision
        joined, numbers = batch
        for content, number in zip(joined.split(b"\n"), numbers, strict=True):
            if number >= 0:
                feed_call(content, number)
            else:
                feed_decision(content, ~number)
        return self.tally, self.changes


_WORKER: list[_Worker] = []
"""The worker's state (in the worker process only)."""


def _start_worker(grants: GrantSet, protected: ProtectedPaths, keep: Keep | None) -> None:
    # forked: the arguments are the parent's objects, not pickled copies
    _WORKER.append(_Worker(grants, protected, keep))


def _decide_batch(batch: _Batch) -> _Answer:
    return _WORKER[0].batch(batch)


def parallel_worth_it(log_bytes: int) -> bool:
    return log_bytes >= PARALLEL_MIN_BYTES and (os.cpu_count() or 1) > 1


class DecidePool:
    """Feed verified lines in order (`on_line`); the tally gets what the calls among them
    come to, in the same order."""

    def __init__(self, grants: GrantSet, protected: ProtectedPaths, keep: Keep | None,
                 tally: ReplayTally) -> None:
        """`keep`: the calls to replay (None: every call)."""
        # One worker: its reader pairs each call with its decision across batches.
        self._executor = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("fork"),
            initializer=_start_worker, initargs=(grants, protected, keep))
        self._tally = tally
        self._lines: list[bytes] = []
        self._numbers: list[int] = []
        self._flying: deque[Future[_Answer]] = deque()
        self.on_line = self._line_taker()
        """`ChainVerifier`'s `on_line`: each line it takes in, in order."""

    def _line_taker(self) -> Callable[[bytes, LineFacts], None]:
        # A closure over the two lists: it runs for every line of the log.
        lines, numbers = self._lines, self._numbers
        add_line, add_number = lines.append, numbers.append
        send = self._send

        def on_line(content: bytes, facts: LineFacts) -> None:
            key = facts.key
            if key == "call":
                add_number(facts.seq)
            elif key == "decision":
                add_number(~facts.call)  # type: ignore[operator]  # a decision names one
            else:
                return
            add_line(content)
            if len(lines) >= BATCH:
                send()

        return on_line

    def _send(self) -> None:
        batch = (b"\n".join(self._lines), self._numbers.copy())
        self._lines.clear()
        self._numbers.clear()
        self._flying.append(self._executor.submit(_decide_batch, batch))
        while len(self._flying) >= IN_FLIGHT:
            self._land()

    def _land(self) -> None:
        tally, changes = self._flying.popleft().result()
        self._tally.merge(tally, changes)

    def finish(self) -> None:
        """Decide what is left and wait for every answer."""
        if self._lines:
            self._send()
        while self._flying:
            self._land()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
