"""Re-deciding a long history on a second core (`bxctl grants replay`).

Reading and verifying the log takes one core; `decide` for every call takes
about as long again.  For a big log (`PARALLEL_MIN_BYTES`), `DecidePool` hands
the calls in batches to one worker process, forked with the compiled grant set
and the protected paths already in memory (a fork does not pickle `initargs`),
while the reading goes on; the
answers come back in the order the calls were read, so what replay prints is
the same as without it (tests run both).  The worker runs the same pure
`Redecider` (`boxmaker.policy.decide`); it does no I/O of its own.
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
from ..policy._replay import Redecided, Redecider
from ..proto._history import HistoryCall
from ..proto._taint import LABELS, Label, Taint

PARALLEL_MIN_BYTES: Final = 16 * 1024 * 1024
BATCH: Final = 4096
IN_FLIGHT: Final = 4

OnDecided = Callable[[HistoryCall, Redecided], None]
_Key = tuple[str, str, Label, bool]
"""tool, stored argument text, label, untrusted: plain values, cheap to pickle."""
_Answer = tuple[str, str | None, Label | None, bool | None, tuple[str, ...]]
_TAINTS: Final = {(t.label, t.untrusted): t for t in (
    Taint(label=label, untrusted=untrusted) for label in LABELS for untrusted in (False, True))}

_WORKER: dict[str, Redecider] = {}
"""The worker's Redecider (in the worker process only)."""


def _start_worker(grants: GrantSet, protected: ProtectedPaths) -> None:
    # forked: the arguments are the parent's objects, not pickled copies
    _WORKER["redecider"] = Redecider(grants, protected)


def _decide_batch(keys: list[_Key]) -> list[_Answer]:
    decide = _WORKER["redecider"].decide
    out: list[_Answer] = []
    for tool, args_text, label, untrusted in keys:
        r = decide(tool, args_text, _TAINTS[(label, untrusted)])
        out.append((r.outcome, r.grant, r.label, r.untrusted, r.matched))
    return out


def parallel_worth_it(log_bytes: int) -> bool:
    return log_bytes >= PARALLEL_MIN_BYTES and (os.cpu_count() or 1) > 1


class DecidePool:
    """Feed calls in order; `on_decided` gets each with its answer, in the same order."""

    def __init__(self, grants: GrantSet, protected: ProtectedPaths,
                 on_decided: OnDecided) -> None:
        self._executor = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("fork"),
            initializer=_start_worker, initargs=(grants, protected))
        self._on_decided = on_decided
        self._batch: list[HistoryCall] = []
        self._flying: deque[tuple[Future[list[_Answer]], list[HistoryCall]]] = deque()

    def __call__(self, call: HistoryCall) -> None:
        self._batch.append(call)
        if len(self._batch) >= BATCH:
            self._send()

    def _send(self) -> None:
        calls, self._batch = self._batch, []
        keys = [(c.tool, c.args_text, c.state.label, c.state.untrusted) for c in calls]
        self._flying.append((self._executor.submit(_decide_batch, keys), calls))
        while len(self._flying) >= IN_FLIGHT:
            self._land()

    def _land(self) -> None:
        future, calls = self._flying.popleft()
        on_decided = self._on_decided
        for call, (outcome, grant, label, untrusted, matched) in zip(
                calls, future.result(), strict=True):
            on_decided(call, Redecided(outcome=outcome, grant=grant, label=label,
                                       untrusted=untrusted, matched=matched))

    def finish(self) -> None:
        """Decide what is left and wait for every answer."""
        if self._batch:
            self._send()
        while self._flying:
            self._land()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
