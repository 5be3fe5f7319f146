"""Command containers removed after the answer (issue 25): trio.

A hooked `run_command` call whose program ran to its end is answered as soon
as podman has its exit status and output; its container (exited: nothing in
it runs, its mount namespace went with its last process) is removed here,
behind the answer, by a shielded ``podman rm --force --volumes`` (what ``run
--rm`` removed: the container and its anonymous volumes).  The removal always
happens:

- `serve` runs in brokerd's background nursery; `hold` reserves the removal
  and hands back its start, which the call's outcome carries as
  `RunOutcome.after_answer`: brokerd calls it once the answer is sent (or
  could not be), so that the removal's podman does not compete with the
  result record and the answer;
- `drain` (brokerd's shutdown, before the background nursery is cancelled)
  starts any removal held and not yet started and waits until all have ended;
- with no nursery (not served yet, or already stopped) or more than `limit`
  removals under way, there is no room: the caller keeps ``run --rm``, or
  removes the container itself when `hold` declines;
- after a kill -9 the start-up sweep removes what is left (`remove_leftovers`).

Cancelled or failed calls, timeouts and refused mounts are not deferred: the
caller removes those containers before it answers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import trio

from ._three_steps import remove_container

PENDING_LIMIT = 8
"""At most this many removals under way; past it a call removes its own container."""


class Removals:
    """Removals behind the answer (see above)."""

    def __init__(self, podman: str, *, limit: int = PENDING_LIMIT) -> None:
        self.podman = podman
        self.limit = limit
        self.pending: set[str] = set()
        """The containers whose removal is held or under way."""
        self._held: set[str] = set()
        """Reserved by `hold`, not started yet."""
        self._nursery: trio.Nursery | None = None
        self._draining = False
        """Set by `drain`: from then on `hold` declines (the caller removes its own)."""
        self._idle = trio.Event()
        self._idle.set()

    @property
    def room(self) -> bool:
        """True when a call may leave its container to `hold` (served, not too many)."""
        return (self._nursery is not None and not self._draining
                and len(self.pending) < self.limit)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Hold the nursery the removals run in until cancelled (then they end first:
        each is shielded)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def hold(self, name: str) -> Callable[[], None] | None:
        """Reserve the removal of `name`; returns its start (call it once, after the
        answer), or None: the caller removes the container itself."""
        if self._nursery is None or self._draining or name in self.pending:
            return None
        self.pending.add(name)
        self._held.add(name)
        self._idle = trio.Event()
        return functools.partial(self._start, name)

    def _start(self, name: str) -> None:
        if name not in self._held:
            return  # started already (twice, or by `drain`)
        self._held.discard(name)
        if self._nursery is None:
            raise RuntimeError("a held removal outlived its nursery")  # our bug: drain first
        self._nursery.start_soon(self._remove, name)

    async def _remove(self, name: str) -> None:
        try:
            # --volumes: what the `run --rm` it stands in for removed too
            await remove_container(self.podman, name, volumes=True)
        finally:
            self.pending.discard(name)
            if not self.pending:
                self._idle.set()

    async def drain(self) -> None:
        """Start what is held, then wait (shielded) until every removal has ended.

        From here on `hold` declines, so `_idle` is not replaced while this waits on it."""
        self._draining = True
        for name in sorted(self._held):
            self._start(name)
        with trio.CancelScope(shield=True):
            await self._idle.wait()
