"""An MCP server on the oci launcher (issue 26, `[runner] launcher = "oci"`): trio.

The same server container as `PodmanMcpLauncher`'s three steps, run by the
OCI runtime directly on a bundle brokerd writes (`_oci.OciRuntime`), as
`run_command`'s calls are (`_command_oci.py`):

1. the declaration's image is mounted once per brokerd (``podman image
   mount``, rootful podman only) and each call gets a fresh bundle whose root
   is an overlay over it (`OciRuntime.call_bundle`), read-only inside;
2. its ``config.json`` (`mcp_config`): the toolkit container's wall
   (`container_config`: no capability, no new privileges, boxmaker's seccomp
   profile, its own network namespace with nothing in it, podman's masked
   and read-only paths) around the declaration's command, environment
   (`server_environment`), memory, pids, cpus and ``/tmp`` size, the call's
   mounts, and the ``createRuntime`` hook in the place of podman's ``init``:
   brokerd walks each mount root below ``/proc/<pid>/root`` before anything
   of the server's runs (`Gate`), and a refusal is `UnsafeTarget`;
3. ``runc run`` with the server's stdin and stdout as its pipes; on the way
   out stdin is closed, the 2 s grace given (`end_server`), and the
   container is deleted with its bundle (shielded).

Egress (a sidecar's network namespace) is not on this path.  Under the
default (`[runner] launcher` unset) a server that declares `hosts` keeps
podman's three steps and sidecar, the wall it had before the default changed;
with ``launcher = "oci"`` written (`OciRuntime.explicit`) it is refused before
anything starts (`sidecar` raises `PodmanCommandError` in words that say so).
Without a direct path (rootless podman, a failed set-up) every server goes
through podman's three steps.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import trio

from ..._sockets._sd import child_environment
from ...proto.mcp import ServerDecl
from ._hook import hook_entry
from ._hook_gate import Gate
from ._mcp_argv import server_environment
from ._mcp_launch import Launch, PodmanMcpLauncher, end_server
from ._mounts import Mount
from ._oci import OciRuntime
from ._oci_config import Process, container_config
from ._podman_check import PodmanCommandError, podman_command

EGRESS_REFUSED: Final = ("a server with egress (`hosts`) does not run on the oci launcher "
                         "(its sidecar's network namespace is podman's): set [runner] "
                         "launcher = \"podman\", leave the key unset, or declare no hosts")


def mcp_config(oci: OciRuntime, decl: ServerDecl, *, rootfs: str, name: str, uid: int,
               gid: int, mounts: Sequence[Mount], state_fifo: str, verdict_fifo: str
               ) -> dict[str, Any]:
    """The runtime-spec configuration of one server container (see above), pure."""
    if not decl.command:
        raise ValueError("an empty command")  # our bug: S10 refuses it
    process = Process(
        args=tuple(decl.command), env=tuple(f"{k}={v}" for k, v in server_environment(decl)),
        cwd="/tmp", memory=decl.memory, pids=decl.pids, cpus=decl.cpus, tmpfs_size=decl.tmp)
    config = container_config(oci.settings, process, rootfs=rootfs,
                              cgroups_path=f"/boxmaker-{oci.instance}/{name}", uid=uid,
                              gid=gid, mounts=mounts, seccomp=oci.seccomp_config)
    config["hooks"] = {"createRuntime": [hook_entry(state_fifo, verdict_fifo)]}
    return config


class OciMcpLauncher(PodmanMcpLauncher):
    """Each server container run by the OCI runtime (see the module's docstring)."""

    def __init__(self, oci: OciRuntime, *, uid: int, gid: int) -> None:
        super().__init__(oci.settings, uid=uid, gid=gid, rootless=False)
        self.oci = oci
        self._lowers: dict[str, str] = {}
        self._lock = trio.Lock()

    @property
    def direct(self) -> bool:
        return self.oci.direct

    async def _lower(self, image: str) -> str:
        """The image's root file system, mounted once (``podman image mount``)."""
        async with self._lock:
            if image not in self._lowers:
                raw = await podman_command([self.settings.podman, "image", "mount", image])
                rootfs = raw.decode("utf-8", "replace").strip()
                if not rootfs.startswith("/") or not os.path.isdir(rootfs):
                    raise PodmanCommandError(
                        f"`podman image mount` gave no directory ({rootfs[:200]!r})")
                self._lowers[image] = rootfs
            return self._lowers[image]

    async def aclose(self) -> None:
        """Unmount the images mounted for servers (shielded; a failure is left)."""
        with trio.CancelScope(shield=True):
            for image in list(self._lowers):
                del self._lowers[image]
                with contextlib.suppress(PodmanCommandError):
                    await podman_command([self.settings.podman, "image", "unmount", image])

    @contextlib.asynccontextmanager
    async def sidecar(self, name: str, egress_dir: str, *, ready_timeout_s: float
                      ) -> AsyncIterator[None]:
        if self.direct and self.oci.explicit:
            raise PodmanCommandError(EGRESS_REFUSED)
        async with super().sidecar(name, egress_dir, ready_timeout_s=ready_timeout_s):
            yield

    @contextlib.asynccontextmanager
    async def launch(self, launch: Launch) -> AsyncIterator[trio.Process]:
        if launch.network_of is not None and self.direct and self.oci.explicit:
            raise PodmanCommandError(EGRESS_REFUSED)
        if not self.direct or launch.network_of is not None:
            # no direct path, or egress under the default: podman's three steps
            async with super().launch(launch) as process:
                yield process
            return
        lower = await self._lower(launch.decl.image)
        async with self.oci.call_bundle(launch.name, lower) as bundle:
            config = mcp_config(self.oci, launch.decl, rootfs=os.fspath(bundle / "rootfs"),
                                name=launch.name, uid=self.uid, gid=self.gid,
                                mounts=launch.mounts,
                                state_fifo=os.fspath(bundle / "hook-state"),
                                verdict_fifo=os.fspath(bundle / "hook-verdict"))
            (bundle / "config.json").write_text(json.dumps(config), encoding="utf-8")
            under = os.path.realpath(bundle / "rootfs")
            gate = Gate(bundle, launch.identities, lambda _state: under)
            log = bundle / "runtime.log"
            try:
                process = await trio.lowlevel.open_process(
                    self.oci.runtime_argv("--log", os.fspath(log), "--log-format", "json",
                                          "run", "--bundle", os.fspath(bundle), launch.name),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=child_environment())
                try:
                    await _gated(gate, process)
                    yield process
                finally:
                    await end_server(process)
            finally:
                await gate.aclose()


async def _gated(gate: Gate, process: trio.Process) -> None:
    """Until the hook's verdict, or runc's end before it: `UnsafeTarget` on a refusal,
    `PodmanCommandError` when runc ended without one (its log's error)."""
    async with trio.open_nursery() as nursery:

        async def verdict() -> None:
            await gate.serve()
            nursery.cancel_scope.cancel()

        async def ended() -> None:
            await process.wait()
            await trio.sleep(0)
            nursery.cancel_scope.cancel()

        nursery.start_soon(verdict)
        nursery.start_soon(ended)
    if gate.refused is not None:
        raise gate.refused
    if not gate.checked:
        raise PodmanCommandError(f"the OCI runtime ended before the mounts were checked "
                                 f"(exit {process.returncode})")

