"""The commands runtime (12-tool-sources "run_command"): runs on `commands`.

It rides on the podman runtime of the same brokerd (its settings, its host
walker and protected set, its scratch directory's mask sources, its start-up
check) and adds the one thing it needs of its own: the owner's commands image
(`[commands] image`), checked to be in podman's local storage at start.  Each
allowed call is planned by `plan_command_call` (the winning grant's `paths`,
`write` and the deny masks the RunSpec carries) and run:

- on the podman launcher by `run_command_hooked` (one ``podman run --rm``,
  the mounts checked by runc's ``createRuntime`` hook) once a trial run at
  start showed podman running that hook; else (a rootless podman, or a trial
  that failed) by `run_command_container` (podman's three steps, the init
  process id from ``--pidfile`` in the scratch directory);
- on the oci launcher (`OciRuntime.direct`) by `run_command_bundle`: the
  commands image is mounted once at start (``podman image mount``) and each
  call's container is run by the OCI runtime on a bundle, its mounts checked
  by runc's ``createRuntime`` hook before the program starts.

At start, the containers named like a command's that a brokerd killed with -9
left are removed (podman's; the oci launcher's go with its state directory).
On the hooked path a call that ran to its end is answered before its exited
container is removed: `removals` (`_removals.py`) removes it behind the
answer, in the nursery `serve` holds (brokerd's background), and `aclose`
waits for every removal under way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from typing import Literal

import trio

from ..._commands_config import CommandsSettings
from ...proto.tools import RunsOn
from ._command_argv import command_container_name, command_container_prefix
from ._command_mounts import CommandPlan, plan_command_call
from ._command_oci import run_command_bundle
from ._command_run import run_command_container, run_command_hooked
from ._mounts import Mount, UnsafeTarget
from ._oci import OciRuntime
from ._podman import PodmanRuntime
from ._podman_argv import UNAVAILABLE
from ._podman_check import PodmanCommandError, podman_command, remove_leftovers
from ._removals import Removals
from ._spec import RunOutcome, RunSpec

log = logging.getLogger("boxmaker.brokerd.runner.commands")


class CommandsRuntime:
    """run_command's runtime; `start()` after the podman runtime's own start."""

    kind: Literal["podman"] = "podman"
    serves: frozenset[RunsOn] = frozenset({"commands"})

    def __init__(self, files: PodmanRuntime, commands: CommandsSettings) -> None:
        self.files = files
        self.commands = commands
        self._image_problem: str | None = "the commands image has not been checked yet"
        self._rootfs: str | None = None
        """The commands image's mount (the oci launcher's direct path only)."""
        self.hooked = False
        """True once a trial showed podman running the hook (`run_command_hooked`);
        False: the three steps."""
        self.removals = Removals(files.settings.podman)
        """The hooked calls' containers removed after the answer (while `serve` runs)."""

    @property
    def ok(self) -> bool:
        return self.files.ok and self._image_problem is None

    @property
    def reason(self) -> str | None:
        if not self.files.ok:
            return self.files.reason
        if self._image_problem is not None:
            return f"{self._image_problem}. {UNAVAILABLE}"
        return None

    @property
    def direct(self) -> bool:
        """True when each call's container is run by the OCI runtime on a bundle."""
        return isinstance(self.files, OciRuntime) and self.files.direct

    async def start(self) -> None:
        """Check that the commands image is in podman's local storage; remove leftovers;
        on the oci launcher, mount the image."""
        podman = self.files.settings.podman
        try:
            await podman_command([podman, "image", "exists", self.commands.image])
        except PodmanCommandError:
            self._image_problem = (f"the commands image {self.commands.image} is not in "
                                   "podman's local storage (scripts/build-commands-image)")
            return
        if self.files.ok:
            try:
                await remove_leftovers(podman, command_container_prefix(self.files.instance))
            except Exception as exc:  # noqa: BLE001 - logged; a leftover never blocks serving
                log.warning("could not remove leftover command containers: %s", exc)
        if self.direct:
            try:
                raw = await podman_command([podman, "image", "mount", self.commands.image])
            except PodmanCommandError as exc:
                self._image_problem = f"the commands image cannot be mounted ({exc})"
                return
            rootfs = raw.decode("utf-8", "replace").strip()
            if not rootfs.startswith("/") or not os.path.isdir(rootfs):
                self._image_problem = f"`podman image mount` gave no directory ({rootfs!r})"
                return
            self._rootfs = rootfs
        elif self.files.ok and not self.files.check_result.rootless:
            self.hooked = await self._trial_hooked()
            if not self.hooked:
                log.warning("podman did not run the createRuntime hook of a trial command: "
                            "each command goes through podman's three steps")
        self._image_problem = None

    async def _trial_hooked(self) -> bool:
        """One hooked run of ``true`` with a read-only mount of an empty directory: the
        hook must have run and waited for brokerd's verdict (a program the image
        lacks still counts: runc looks it up after the hook)."""
        files = self.files
        name = command_container_name(files.instance, "trial")
        try:
            scratch = files.scratch.call_dir("trial-")
        except OSError:
            return False
        try:
            (scratch / "mnt").mkdir(mode=0o700)
            st = os.stat(scratch / "mnt")
            mount = Mount(source=os.fspath(scratch / "mnt"), destination="/boxmaker-trial",
                          read_only=True)
            plan = CommandPlan(mounts=(mount,), roots=((mount.destination,
                                                        (st.st_dev, st.st_ino)),),
                               cwd_id=(st.st_dev, st.st_ino))
            outcome = await run_command_hooked(
                files.settings, self.commands, name=name, uid=os.getuid(), gid=os.getgid(),
                plan=plan, cwd="/", argv=["true"], stdin=None, scratch=scratch)
        except OSError:
            return False
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return outcome.status == "ok"

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Hold the nursery of the removals behind the answer (brokerd's background)."""
        await self.removals.serve(task_status=task_status)

    async def aclose(self) -> None:
        """Every removal under way ends; the commands image's mount goes (the podman
        runtime owns the scratch directory)."""
        await self.removals.drain()
        if self._rootfs is not None:
            self._rootfs = None
            with trio.CancelScope(shield=True), contextlib.suppress(PodmanCommandError):
                await podman_command([self.files.settings.podman, "image", "unmount",
                                      self.commands.image])

    async def run(self, spec: RunSpec) -> RunOutcome:
        if not self.ok:
            return RunOutcome(status="runner_unavailable", output=None, message=self.reason)
        argv = spec.args.get("argv")
        cwd = spec.args.get("cwd")
        stdin = spec.args.get("stdin")
        if (not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)
                or not isinstance(cwd, str) or not (stdin is None or isinstance(stdin, str))
                or spec.grant_entry is None or not spec.command_paths):
            return RunOutcome(status="unsafe_target", output=None,
                              message="the call has no argv, cwd or grant paths")
        files = self.files
        try:
            plan = plan_command_call(
                files.walker, paths=spec.command_paths, entry=spec.grant_entry, cwd=cwd,
                write=spec.command_write, deny_paths=spec.deny_paths,
                masks=files.mask_sources())
        except UnsafeTarget as exc:
            return RunOutcome(status="unsafe_target", output=None, message=str(exc))
        except OSError as exc:
            return RunOutcome(status="runner_unavailable", output=None,
                              message=f"the call could not be set up ({exc.strerror or exc}). "
                                      f"{UNAVAILABLE}")
        name = command_container_name(files.instance, spec.call_id)
        data = None if stdin is None else stdin.encode("utf-8")
        if self._rootfs is not None and isinstance(files, OciRuntime) and files.direct:
            return await run_command_bundle(
                files, self.commands, lower=self._rootfs, name=name, uid=os.getuid(),
                gid=os.getgid(), plan=plan, cwd=cwd, argv=argv, stdin=data)
        return await self._run_podman(name, plan, cwd, argv, data)

    async def _run_podman(self, name: str, plan: CommandPlan, cwd: str, argv: list[str],
                          stdin: bytes | None) -> RunOutcome:
        files = self.files
        try:
            scratch = files.scratch.call_dir("cmd-")
        except OSError as exc:
            return RunOutcome(status="runner_unavailable", output=None,
                              message=f"the call could not be set up ({exc.strerror or exc}). "
                                      f"{UNAVAILABLE}")
        try:
            if self.hooked:
                return await run_command_hooked(
                    files.settings, self.commands, name=name, uid=os.getuid(), gid=os.getgid(),
                    plan=plan, cwd=cwd, argv=argv, stdin=stdin, scratch=scratch,
                    removals=self.removals)
            return await run_command_container(
                files.settings, self.commands, name=name, uid=os.getuid(), gid=os.getgid(),
                rootless=files.check_result.rootless, plan=plan, cwd=cwd, argv=argv, stdin=stdin,
                pidfile=os.fspath(scratch / "pid"))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
