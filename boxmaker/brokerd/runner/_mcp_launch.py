"""Where an MCP server process runs (12 "Where a server runs"): two launchers, trio.

A launcher starts one server process for one call or probe and yields it as a
`trio.Process` with its three pipes; on the way out it ends it as 12's
lifecycle says: stdin closed (the caller has already closed it once the call
settled), 2 s for the server to exit, then it is killed (removed), shielded.

- `PodmanMcpLauncher`: the three podman steps of `_three_steps.py` (create
  with `build_mcp_create_argv`, init and the mount-identity check, ``start
  --attach --interactive``), the container removed whatever happens.  Raises
  `PodmanCommandError` (create or init failed) or `UnsafeTarget` (a mount is
  not what was walked) before anything ran.
- `SubprocessMcpLauncher`: the declaration's command as a plain process of
  the host, for tests (12 "Tests": the client and lifecycle tests run the
  fixture servers as plain subprocesses).  No wall at all: never configured.

`sidecar` starts a call's egress sidecar (12 "Egress": ``podman run`` of the
tools image's forwarder, the per-call egress directory mounted) and returns
once it wrote ``ready``; on the way out its stdin is closed and it is
removed, shielded.  The test launcher has none (`PodmanCommandError`).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Final, Protocol

import attrs
import trio

from ..._sockets._sd import child_environment
from ...proto._escape import escape_text
from ...proto.mcp import ServerDecl
from ._mcp_argv import (
    build_mcp_create_argv,
    build_sidecar_argv,
    mcp_container_prefix,
    server_environment,
    sidecar_prefix,
)
from ._mounts import Mount
from ._podman_argv import PodmanSettings
from ._podman_check import PodmanCommandError, remove_leftovers
from ._three_steps import MountIdentity, prepared_container, reap, remove_container

EXIT_GRACE_S: Final = 2.0
"""12 "One container per call": after stdin is closed, the server's time to exit."""


@attrs.frozen(kw_only=True)
class Launch:
    """One server process to start: its container name and what it may see."""

    decl: ServerDecl
    name: str
    mounts: Sequence[Mount] = ()
    identities: Sequence[MountIdentity] = ()
    network_of: str | None = None


class McpLauncher(Protocol):
    def launch(self, launch: Launch) -> contextlib.AbstractAsyncContextManager[trio.Process]:
        ...

    def sidecar(self, name: str, egress_dir: str, *, ready_timeout_s: float
                ) -> contextlib.AbstractAsyncContextManager[None]:
        ...


async def end_server(process: trio.Process) -> None:
    """Close stdin, give the server EXIT_GRACE_S, then kill it (shielded)."""
    with trio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await process.stdin.aclose()
        with trio.move_on_after(EXIT_GRACE_S):
            await process.wait()
    await reap(process)


class SubprocessMcpLauncher:
    """The declaration's command as a plain host process (tests only).

    `argv_of` maps a declaration to the host argv (a fixture server's path
    instead of the image's); the environment is the container's (boxmaker's
    own variables and `env`), plus `extra_env`."""

    def __init__(self, argv_of: Callable[[ServerDecl], Sequence[str]],
                 extra_env: dict[str, str] | None = None) -> None:
        self.argv_of = argv_of
        self.extra_env = dict(extra_env or {})
        self.launched: list[str] = []

    @contextlib.asynccontextmanager
    async def sidecar(self, name: str, egress_dir: str, *, ready_timeout_s: float
                      ) -> AsyncIterator[None]:
        raise PodmanCommandError("the test launcher runs no egress sidecar")
        yield  # pragma: no cover

    @contextlib.asynccontextmanager
    async def launch(self, launch: Launch) -> AsyncIterator[trio.Process]:
        env = dict(server_environment(launch.decl)) | self.extra_env
        self.launched.append(launch.name)
        process = await trio.lowlevel.open_process(
            list(self.argv_of(launch.decl)), env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            yield process
        finally:
            await end_server(process)


async def _wait_ready(process: trio.Process, name: str, timeout_s: float) -> None:
    """Until the sidecar wrote ``ready`` (PodmanCommandError when it exits or is late)."""
    assert process.stdout is not None and process.stderr is not None
    seen = b""
    with trio.move_on_after(timeout_s):
        while b"\n" not in seen and len(seen) < 4096:
            chunk = await process.stdout.receive_some(4096)
            if not chunk:
                break
            seen += chunk
    if seen.split(b"\n", 1)[0] == b"ready":
        return
    err = b""
    with trio.move_on_after(1):
        err = bytes(await process.stderr.receive_some(2048))
    raise PodmanCommandError(
        f"the egress sidecar {name} did not become ready: "
        f"{escape_text(err.decode('utf-8', 'replace').strip()) or 'no answer'}")


class PodmanMcpLauncher:
    """One server container in the three podman steps (see the module's docstring)."""

    def __init__(self, settings: PodmanSettings, *, uid: int, gid: int, rootless: bool,
                 pid_dir: str | None = None) -> None:
        self.settings = settings
        self.uid = uid
        self.gid = gid
        self.rootless = rootless
        self.pid_dir = pid_dir
        """A directory of brokerd's own for podman's ``--pidfile`` (None: ``inspect``)."""

    async def remove_leftovers(self, instance: str) -> list[str]:
        """At start: remove every ``boxmaker-<instance>-mcp-*`` container a crash left
        behind (nothing is recorded: the log shows those calls as unfinished)."""
        removed = await remove_leftovers(self.settings.podman, mcp_container_prefix(instance))
        return removed + await remove_leftovers(self.settings.podman, sidecar_prefix(instance))

    @contextlib.asynccontextmanager
    async def sidecar(self, name: str, egress_dir: str, *, ready_timeout_s: float
                      ) -> AsyncIterator[None]:
        """The egress sidecar `name`, ready (see the module's docstring)."""
        podman = self.settings.podman
        argv = build_sidecar_argv(self.settings, name=name, uid=self.uid, gid=self.gid,
                                  rootless=self.rootless, egress_dir=egress_dir)
        try:
            process = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=child_environment())
        except OSError as exc:
            raise PodmanCommandError(f"podman could not be started ({exc.strerror or exc})"
                                     ) from exc
        try:
            await _wait_ready(process, name, ready_timeout_s)
            yield
        finally:
            with trio.CancelScope(shield=True):
                if process.stdin is not None:
                    with contextlib.suppress(trio.BrokenResourceError,
                                             trio.ClosedResourceError):
                        await process.stdin.aclose()
                await remove_container(podman, name)
            await reap(process)

    def create_argv(self, launch: Launch) -> list[str]:
        return build_mcp_create_argv(
            self.settings, launch.decl, name=launch.name, uid=self.uid, gid=self.gid,
            rootless=self.rootless, mounts=launch.mounts, network_of=launch.network_of,
            pidfile=self._pidfile(launch))

    def _pidfile(self, launch: Launch) -> str | None:
        return None if self.pid_dir is None else f"{self.pid_dir}/{launch.name}.pid"

    @contextlib.asynccontextmanager
    async def launch(self, launch: Launch) -> AsyncIterator[trio.Process]:
        podman = self.settings.podman
        async with prepared_container(podman, self.create_argv(launch), launch.name,
                                      launch.identities, pidfile=self._pidfile(launch)):
            process = await trio.lowlevel.open_process(
                [podman, "start", "--attach", "--interactive", launch.name],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=child_environment())
            try:
                yield process
            finally:
                await end_server(process)
