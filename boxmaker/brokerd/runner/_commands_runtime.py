"""The commands runtime (12-tool-sources "run_command"): runs on `commands`.

It rides on the podman runtime of the same brokerd (its settings, its host
walker and protected set, its scratch directory's mask sources, its start-up
check) and adds the one thing it needs of its own: the owner's commands image
(`[commands] image`), checked to be in podman's local storage at start.  Each
allowed call is planned by `plan_command_call` (the winning grant's `paths`,
`write` and the deny masks the RunSpec carries) and run by
`run_command_container` (the three podman steps).
"""

from __future__ import annotations

import os
from typing import Literal

from ..._commands_config import CommandsSettings
from ...proto.tools import RunsOn
from ._command_argv import command_container_name
from ._command_mounts import plan_command_call
from ._command_run import run_command_container
from ._mounts import UnsafeTarget
from ._podman import PodmanRuntime
from ._podman_argv import UNAVAILABLE
from ._podman_check import PodmanCommandError, podman_command
from ._spec import RunOutcome, RunSpec


class CommandsRuntime:
    """run_command's runtime; `start()` after the podman runtime's own start."""

    kind: Literal["podman"] = "podman"
    serves: frozenset[RunsOn] = frozenset({"commands"})

    def __init__(self, files: PodmanRuntime, commands: CommandsSettings) -> None:
        self.files = files
        self.commands = commands
        self._image_problem: str | None = "the commands image has not been checked yet"

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

    async def start(self) -> None:
        """Check that the commands image is in podman's local storage."""
        try:
            await podman_command([self.files.settings.podman, "image", "exists",
                                  self.commands.image])
        except PodmanCommandError:
            self._image_problem = (f"the commands image {self.commands.image} is not in "
                                   "podman's local storage (scripts/build-commands-image)")
            return
        self._image_problem = None

    async def aclose(self) -> None:
        """Nothing of its own to remove: the podman runtime owns the scratch directory."""

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
        return await run_command_container(
            files.settings, self.commands,
            name=command_container_name(files.instance, spec.call_id),
            uid=os.getuid(), gid=os.getgid(), rootless=files.check_result.rootless,
            plan=plan, cwd=cwd, argv=argv,
            stdin=None if stdin is None else stdin.encode("utf-8"))
