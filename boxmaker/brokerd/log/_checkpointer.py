"""Signed checkpoints, made off the call path (10-checkpoints "Checkpoints").

The audit writer hands over the lines of every durable batch (`on_durable`,
a list append and an event: nothing on the call path waits for this).  A
background task hashes them into the tree, and once `interval` has passed
since the last checkpoint signs a new one, saves it atomically as
`audit/checkpoints/signed.checkpoint` (in a worker thread) and wakes the
witness pushers.  At stop, `final` signs the last one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import trio

from ..._checkpoint_files import SIGNED, save_checkpoint
from ...proto.tlog import Checkpoint, SignedCheckpoint, Signer, sign_checkpoint
from ._tiles import TreeStore

log = logging.getLogger("brokerd")


class Checkpointer:
    def __init__(self, *, store: TreeStore, signer: Signer, origin: str, interval_s: float,
                 audit_dir: Path, fsync: bool, wall_clock: Callable[[], float]) -> None:
        self.store = store
        self.signer = signer
        self.origin = origin
        self.interval_s = interval_s
        self.audit_dir = audit_dir
        self.fsync = fsync
        self.wall_clock = wall_clock
        self.latest: SignedCheckpoint | None = None
        self.signed_at: float | None = None
        self.changed = trio.Event()
        self.failure: str | None = None
        self._lines: list[bytes] = []
        self._wake = trio.Event()
        self._last_signed = -math.inf

    def on_durable(self, lines: list[bytes]) -> None:
        """The writer's hook: these lines are written and fsynced, in order."""
        self._lines.extend(lines)
        self._wake.set()

    def _drain(self) -> None:
        if self._lines:
            lines, self._lines = self._lines, []
            self.store.append_lines(lines)

    async def run(self) -> None:
        """Forever: hash new lines as they come, sign at most once per interval."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self._drain()
            due = self._last_signed + self.interval_s
            with trio.move_on_at(due):
                while trio.current_time() < due:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    self._drain()
            await self.sign()

    async def sign(self) -> None:
        """Sign and save a checkpoint of everything durable, if it grew."""
        self._drain()
        self._last_signed = trio.current_time()
        size = self.store.size
        if self.latest is not None and self.latest.checkpoint.size == size:
            return
        checkpoint = Checkpoint(origin=self.origin, size=size, root=self.store.root())
        signed = sign_checkpoint(checkpoint, self.signer)
        try:
            self.store.flush()
        except OSError as exc:  # never fails a call: said in status, tried again later
            self.failure = f"cannot store the tree's hashes: {exc.strerror or exc}"
            log.error("checkpoint of size %d not signed: %s", size, self.failure)
            return
        try:
            await trio.to_thread.run_sync(
                lambda: save_checkpoint(self.audit_dir, SIGNED, signed.encode(),
                                        fsync=self.fsync))
        except OSError as exc:
            self.failure = f"cannot save the checkpoint: {exc.strerror or exc}"
            log.error("checkpoint of size %d not saved: %s", size, self.failure)
        else:
            self.failure = None
        self.latest = signed
        self.signed_at = self.wall_clock()
        self.changed.set()
        self.changed = trio.Event()

    async def final(self) -> None:
        """At stop: the last checkpoint (shielded by the caller)."""
        await self.sign()
