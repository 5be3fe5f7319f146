"""The podman runtime (08-runner): one fresh container per allowed call.

The argument list is built here as a list (never a shell string); the
arguments go in on stdin, one JSON answer comes back on stdout, at most
`output_max_bytes` of it; after `timeout_ms` the container is killed by name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import attrs
import trio

from ..._protected import ProtectedSet, protected_set
from ..._sockets._sd import child_environment
from ...proto._escape import escape_text
from ...proto.tools import CATALOGUE, RunsOn
from ._egress import (
    EgressProxy,
    ResolveError,
    Resolver,
    Seal,
    open_unix_listener,
    split_url,
    system_resolver,
    vet_addresses,
)
from ._host_walk import HostWalker
from ._mounts import CallPlan, MaskSources, Mount, UnsafeTarget, plan_file_call
from ._podman_argv import (
    EGRESS_MOUNT,
    EGRESS_SOCKET_NAME,
    KILL_GRACE_S,
    STDERR_KEEP_BYTES,
    UNAVAILABLE,
    PodmanSettings,
    build_argv,
    build_request,
    container_name,
    container_prefix,
    instance_id,
    parse_answer,
    tool_failed,
    toolkit_command,
)
from ._podman_check import (
    PodmanCheck,
    PodmanCommandError,
    check_podman,
    podman_command,
    remove_leftovers,
)
from ._scratch import Scratch, default_scratch_root
from ._spec import RunOutcome, RunSpec
from ._three_steps import reap, remove_container

log = logging.getLogger("boxmaker.brokerd.runner.podman")

_RESOLVE_TIMEOUT_S = 10.0

@attrs.frozen
class _Exit:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    too_large: bool
    timed_out: bool


async def _read_capped(
    stream: trio.abc.ReceiveStream, keep: int, *, stop_early: bool = False
) -> tuple[bytes, bool]:
    """Up to `keep` bytes, and whether more came.  The rest is read and dropped,
    or, with `stop_early`, left unread (the caller then kills the writer)."""
    buf = bytearray()
    more = False
    while chunk := await stream.receive_some(65536):
        room = keep - len(buf)
        if len(chunk) > room:
            more = True
            if stop_early:
                buf += chunk[: max(room, 0)]
                break
        buf += chunk[: max(room, 0)]
    return bytes(buf), more


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(65536):
        pass


class PodmanRuntime:
    """The podman runtime: implements the Runtime protocol of the runner seam.

    `kind`, `ok` and `reason` are what brokerd shows in `bxctl status`.

    Call `start()` once before serving: it runs the start-up check and removes
    this installation's leftover containers.  Until it reports ok, every call
    answers runner_unavailable with the check's reason.
    """

    serves: frozenset[RunsOn] = frozenset({"files", "fetch"})
    """The toolkit's tools: the file tools and the fetch."""

    def __init__(
        self,
        settings: PodmanSettings,
        home: Path,
        *,
        resolver: Resolver | None = None,
        scratch_root: Path | None = None,
        protected: ProtectedSet | None = None,
        trial_run: bool = True,
    ) -> None:
        self.settings = settings
        self.instance = instance_id(home)
        self._resolver: Resolver = resolver or system_resolver
        self._trial_run = trial_run
        self._uid = os.getuid()
        self._gid = os.getgid()
        self.scratch = Scratch(
            scratch_root or default_scratch_root(home, self.instance), uid=self._uid
        )
        if protected is None:
            # Tests and tools that make a runtime of their own: brokerd passes
            # the set it computed once (boxmaker._protected.protected_set).
            # Without `podman info` (no store paths): brokerd always passes its set.
            protected = protected_set([os.fspath(home)], podman=None)
        self.protected = protected
        self._walker = HostWalker(self._uid, protected)
        self.check_result = PodmanCheck(
            ok=False,
            image=settings.image,
            reason=f"the podman runner has not been checked yet. {UNAVAILABLE}",
        )

    kind: Literal["podman"] = "podman"
    launcher: Literal["podman", "oci"] = "podman"

    @property
    def walker(self) -> HostWalker:
        """The host walker over brokerd's protected set (the commands runtime walks with it)."""
        return self._walker

    @property
    def ok(self) -> bool:
        return self.check_result.ok

    @property
    def reason(self) -> str | None:
        return self.check_result.reason

    # -- start-up ------------------------------------------------------------

    async def start(self) -> PodmanCheck:
        """The start-up check, then removal of leftover containers; returns the check."""
        try:
            self.scratch.reset()
        except OSError as exc:
            self.check_result = PodmanCheck(
                ok=False, image=self.settings.image, reason=f"{exc}. {UNAVAILABLE}"
            )
            log.warning("runner unavailable: %s", exc)
            return self.check_result
        trial = None
        if self._trial_run:
            probe = await check_podman(self.settings.podman, self.settings.image, None)
            if not probe.ok:
                self.check_result = probe
                return probe
            trial = self.argv(
                name=container_name(self.instance, "check"),
                mounts=[],
                command=["python3", "-c", "import boxmaker.toolkit"],
                rootless=probe.rootless,
            )
        result = await check_podman(self.settings.podman, self.settings.image, trial)
        if result.ok:
            try:
                await remove_leftovers(self.settings.podman, container_prefix(self.instance))
            except Exception as exc:  # noqa: BLE001 - logged; a leftover never blocks serving
                log.warning("could not remove leftover tool containers: %s", exc)
        self.check_result = result
        if not result.ok:
            log.warning("runner unavailable: %s", result.reason)
        return result

    def argv(
        self,
        *,
        name: str,
        mounts: Sequence[Mount],
        command: Sequence[str],
        rootless: bool | None = None,
    ) -> list[str]:
        return build_argv(
            self.settings,
            name=name,
            uid=self._uid,
            gid=self._gid,
            rootless=self.check_result.rootless if rootless is None else rootless,
            mounts=mounts,
            command=command,
        )

    async def aclose(self) -> None:
        """At brokerd's stop, after the last call: remove the scratch directory and end
        rootless podman's pause process.

        Nothing else is kept between calls.  A rootless podman leaves a pause
        process (the holder of its user namespace) in brokerd's cgroup; under
        systemd's KillMode=mixed the stop then waits TimeoutStopSec= for it and
        ends in SIGKILL and a failed unit.  `podman system migrate` ends it (and
        would stop containers, but every call's container is gone by now).
        """
        self.scratch.remove()
        if not self.check_result.rootless:
            return
        with trio.CancelScope(shield=True):
            try:
                await podman_command([self.settings.podman, "system", "migrate"],
                                     timeout_s=30)
            except PodmanCommandError as exc:
                log.warning("rootless podman's pause process was not ended: %s", exc)

    # -- one call --------------------------------------------------------------

    async def run(self, spec: RunSpec) -> RunOutcome:
        if not self.check_result.ok:
            reason = self.check_result.reason
            return RunOutcome(status="runner_unavailable", output=None, message=reason)
        entry = CATALOGUE.get(spec.tool)
        if entry is None or entry.runs_on not in self.serves:
            return RunOutcome(
                status="runner_unavailable",
                output=None,
                message=f"the podman runner has no tool {_one_line(spec.tool)}. {UNAVAILABLE}",
            )
        try:
            if entry.runs_on == "fetch":
                return await self._run_fetch(spec)
            plan = self._file_plan(spec)
        except UnsafeTarget as exc:
            return RunOutcome(status="unsafe_target", output=None, message=str(exc))
        except OSError as exc:
            # The egress directory or socket could not be set up: the host's fault.
            return RunOutcome(
                status="runner_unavailable",
                output=None,
                message=f"the call could not be set up ({exc.strerror or exc}). {UNAVAILABLE}",
            )
        return await self._run_container(spec, list(plan.mounts), None, plan)

    def _file_plan(self, spec: RunSpec) -> CallPlan:
        path = spec.args.get("path")
        if not isinstance(path, str) or spec.grant_entry is None:
            raise UnsafeTarget("the call has no path or no grant path")
        mode = spec.args.get("mode")
        return plan_file_call(
            self._walker,
            tool=spec.tool,
            path=path,
            grant_path=spec.grant_entry,
            mode=mode if isinstance(mode, str) else None,
            deny_paths=spec.deny_paths,
            masks=self.mask_sources(),
        )

    def mask_sources(self) -> MaskSources:
        directory, file = self.scratch.mask_sources()
        return MaskSources(directory=os.fspath(directory), file=os.fspath(file))

    async def _run_fetch(self, spec: RunSpec) -> RunOutcome:
        url = spec.args.get("url")
        if not isinstance(url, str):
            raise UnsafeTarget("the call has no URL")
        _scheme, host, port = split_url(url)
        try:
            with trio.fail_after(_RESOLVE_TIMEOUT_S):
                addresses = await self._resolver(host, port)
        except ResolveError as exc:
            raise UnsafeTarget(f"{host}: {exc}") from exc
        except trio.TooSlowError as exc:
            raise UnsafeTarget(f"{host}: the name did not resolve in time") from exc
        problem = vet_addresses(addresses, spec.private_network)
        if problem is not None:
            raise UnsafeTarget(f"{host} resolves to an address that may not be reached: {problem}")
        call_dir = self.scratch.call_dir("egress-")
        try:
            listener = await open_unix_listener(call_dir / EGRESS_SOCKET_NAME)
            proxy = EgressProxy(Seal(host=host, port=port, addresses=tuple(addresses)))
            async with trio.open_nursery() as nursery:
                await nursery.start(proxy.serve, listener)
                # Read-only: connecting to a socket needs no write access to its file system.
                mount = Mount(source=str(call_dir), destination=EGRESS_MOUNT, read_only=True)
                outcome = await self._run_container(
                    spec, [mount], f"{EGRESS_MOUNT}/{EGRESS_SOCKET_NAME}"
                )
                nursery.cancel_scope.cancel()
            return outcome
        finally:
            shutil.rmtree(call_dir, ignore_errors=True)

    async def _run_container(
        self,
        spec: RunSpec,
        mounts: list[Mount],
        egress_socket: str | None,
        plan: CallPlan | None = None,
    ) -> RunOutcome:
        name = container_name(self.instance, spec.call_id)
        request = build_request(
            spec.args,
            self.settings.output_max_bytes,
            egress_socket,
            plan.checked() if plan is not None else None,
        )
        try:
            done = await self._launch(name, mounts, toolkit_command(spec.tool), request)
        except OSError as exc:
            return RunOutcome(
                status="runner_unavailable",
                output=None,
                message=f"podman could not be started ({exc.strerror or exc}). {UNAVAILABLE}",
            )
        if done.stderr:
            log.info(
                "call %d: container stderr: %s",
                spec.call_id,
                escape_text(done.stderr.decode("utf-8", "replace")),
            )
        if done.timed_out:
            return RunOutcome(
                status="timeout",
                output=None,
                message=f"the tool ran past {self.settings.timeout_ms} ms and was killed",
            )
        if done.too_large:
            return tool_failed("output_too_large", "output too large")
        outcome = parse_answer(done.stdout)
        if outcome is not None:
            return outcome
        if done.returncode in (125, 126, 127) and not done.stdout:
            err = escape_text(done.stderr[-2048:].decode("utf-8", "replace").strip())
            return RunOutcome(
                status="runner_unavailable",
                output=None,
                message=f"podman could not run the container: {err}. {UNAVAILABLE}",
            )
        if done.returncode == 137:
            return tool_failed("killed", "the tool was killed (out of memory?)")
        return tool_failed("no_answer", f"the toolkit gave no answer (exit {done.returncode})")

    async def _launch(
        self, name: str, mounts: Sequence[Mount], command: Sequence[str], request: bytes
    ) -> _Exit:
        """One fresh container: ``podman run --rm`` (the oci launcher overrides this)."""
        argv = self.argv(name=name, mounts=mounts, command=command)
        return await self._execute(argv, name, request)

    async def _execute(self, argv: list[str], name: str, request: bytes) -> _Exit:
        cap = self.settings.output_max_bytes
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=self.scratch.work_dir(), env=child_environment(),
        )
        assert process.stdin and process.stdout and process.stderr
        stdout = b""
        stderr = b""
        too_large = False
        timed_out = False
        try:
            with trio.move_on_after(self.settings.timeout_ms / 1000) as scope:

                async def feed() -> None:
                    assert process.stdin
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await process.stdin.send_all(request)
                    await process.stdin.aclose()

                async def collect_out() -> None:
                    nonlocal stdout, too_large
                    assert process.stdout
                    stdout, too_large = await _read_capped(process.stdout, cap, stop_early=True)
                    if too_large:
                        # Not waiting for a tool that keeps writing.
                        await self._kill(name)
                        await _drain(process.stdout)

                async def collect_err() -> None:
                    nonlocal stderr
                    assert process.stderr
                    stderr, _ = await _read_capped(process.stderr, STDERR_KEEP_BYTES)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(feed)
                    nursery.start_soon(collect_out)
                    nursery.start_soon(collect_err)
                await process.wait()
            if scope.cancelled_caught:
                timed_out = True
                await self._kill(name)
                with trio.move_on_after(KILL_GRACE_S):
                    await process.wait()
        finally:
            await reap(process)
            if timed_out or process.returncode not in (0, None):
                # --rm removes the container on a normal exit; after a kill
                # or a failure make sure nothing is left behind.
                await self._kill(name)
        return _Exit(process.returncode, stdout, stderr, too_large, timed_out)

    async def _kill(self, name: str) -> None:
        """Kill and remove the container by name (shielded: it runs during cancellation)."""
        await remove_container(self.settings.podman, name)


def _one_line(text: str) -> str:
    return escape_text(text, keep_newlines=False)
