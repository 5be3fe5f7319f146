"""brokerd's side of the createRuntime hook (`_hook.py`): trio.

`Gate` makes the two FIFOs in a directory of brokerd's own, reads the state
line the hook writes, walks each mount root below ``/proc/<pid>/root``
(`check_mount_identities`, under the container's root file system as the
init process sees it before its pivot_root) and answers the hook: ``ok``
when every root is what the host walk found, ``no`` otherwise (`refused`
says why; nothing of the call's has run).  Where the root file system is
comes from `rootfs`: the bundle brokerd wrote (the oci launcher), or the
``root.path`` of the ``config.json`` in the bundle the state names (podman's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from ._hook import VERDICT_NO, VERDICT_OK
from ._mounts import UnsafeTarget
from ._three_steps import MountIdentity, check_mount_identities

STATE_MAX_BYTES = 64 * 1024
"""The hook's state line (runc's state JSON) is a few hundred bytes."""
CONFIG_MAX_BYTES = 4 * 1024 * 1024


def bundle_rootfs(state: dict[str, Any]) -> str:
    """``root.path`` of the config.json in the bundle the state names (blocking I/O)."""
    bundle = state.get("bundle")
    if not isinstance(bundle, str) or not bundle.startswith("/"):
        raise ValueError("the container state names no bundle")
    with open(os.path.join(bundle, "config.json"), "rb") as file:
        config = json.loads(file.read(CONFIG_MAX_BYTES))
    root = config["root"]["path"]
    if not isinstance(root, str):
        raise ValueError("the bundle's config.json names no root")
    return os.path.realpath(os.path.join(bundle, root))


class Gate:
    """The state FIFO in, the identity walk, the verdict FIFO out (see above)."""

    def __init__(self, directory: Path, mounts: Sequence[MountIdentity],
                 rootfs: Callable[[dict[str, Any]], str]) -> None:
        self.mounts = tuple(mounts)
        self.rootfs = rootfs
        self.state_fifo = directory / "hook-state"
        self.verdict_fifo = directory / "hook-verdict"
        os.mkfifo(self.state_fifo, 0o600)
        os.mkfifo(self.verdict_fifo, 0o600)
        # Read-write: neither open waits for the hook, a read never sees an early
        # end of file, and the verdict stays in the pipe until the hook reads it.
        flags = os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC
        self.state = trio.lowlevel.FdStream(os.open(self.state_fifo, flags))
        self.verdict = os.open(self.verdict_fifo, flags)
        self.checked = False
        self.refused: UnsafeTarget | None = None

    async def serve(self) -> None:
        """Answer the hook once (run in a nursery; cancelled when runc ended first)."""
        line = bytearray()
        while b"\n" not in line:
            chunk = await self.state.receive_some(4096)
            line += chunk
            if not chunk or len(line) > STATE_MAX_BYTES:
                self.refused = UnsafeTarget("the runtime's hook gave no container state")
                os.write(self.verdict, VERDICT_NO)
                return
        try:
            state = json.loads(bytes(line).split(b"\n", 1)[0])
            if not isinstance(state, dict):
                raise ValueError("the container state is not an object")
            pid = state["pid"]
            if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                raise ValueError(f"no process id ({pid!r})")
            await trio.to_thread.run_sync(self._check, pid, state)
        except UnsafeTarget as exc:
            self.refused = exc
        except (ValueError, KeyError, TypeError, OSError) as exc:
            self.refused = UnsafeTarget(f"the container's mounts could not be checked ({exc})")
        else:
            self.checked = True
        os.write(self.verdict, VERDICT_OK if self.checked else VERDICT_NO)

    def _check(self, pid: int, state: dict[str, Any]) -> None:
        check_mount_identities(pid, self.mounts, under=self.rootfs(state))

    async def aclose(self) -> None:
        await self.state.aclose()
        os.close(self.verdict)
