"""One `run_command` container through podman (12-tool-sources): trio.

On a rootful podman, `run_command_hooked`: one ``podman --hooks-dir D run
--rm`` whose createRuntime hook (`_hook.py`, `_hook_gate.Gate`) hands brokerd
the init process id once the mounts are in place and before the program is
looked up; brokerd checks each mount root's identity below
``/proc/<pid>/root`` and only its ``ok`` lets runc go on.  The identity walk
of the three steps at the same point of the container's life, in one podman
process instead of four (create, init, start, rm).  Its outcomes are those
below; a program podman cannot find is podman's exit 127 with its message.
Given `Removals` with room, the run has no ``--rm``: the answer goes out once
the program's exit status and output are in, and its exited container is
removed behind it (`_removals.py`; the outcome's `after_answer` starts it).

On a rootless podman (its runc runs in podman's user namespace), the three steps:

`run_command_container` builds the create argument list of the call
(`build_command_create_argv`, with the plan's mounts) and runs it through
`_three_steps.py`: create; init, then each mount root's identity below
``/proc/<pid>/root``; start --attach with the call's stdin (closed at once
when there is none), stdout and stderr each kept up to half of
`output_max_bytes` and counted, the container killed past the bound or after
`timeout_ms`; removal, whatever happens.  The outcome:

- ``ok`` with `command_result`'s output: the program ran, whatever its exit;
- ``ok`` with exit 127 (126) when ``podman init`` failed because the program
  is missing (not executable): runc looks it up at create, so it never ran,
  and podman's message is its stderr (docs/decisions.md);
- ``timeout`` (output null) after `timeout_ms`;
- ``unsafe_target`` when a mount is not what the host walk checked;
- ``runner_unavailable`` when podman could not create or init it otherwise.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from ..._commands_config import CommandsSettings
from ..._sockets._sd import child_environment
from ...proto._escape import escape_text
from ._command_argv import build_command_create_argv, build_command_run_argv
from ._command_mounts import CommandPlan
from ._command_result import command_result
from ._hook import hooks_dir_file
from ._hook_gate import Gate, bundle_rootfs
from ._mounts import UnsafeTarget
from ._podman_argv import UNAVAILABLE, PodmanSettings
from ._podman_check import PodmanCommandError
from ._removals import Removals
from ._spec import RunOutcome
from ._three_steps import (
    Captured,
    MountIdentity,
    capture,
    prepared_container,
    remove_container,
    run_captured,
)

_NOT_FOUND = "executable file not found in $PATH"
_DENIED = "permission denied"


def _init_failure(message: str, output_max_bytes: int) -> RunOutcome | None:
    """The outcome of an init that failed because of the program, or None."""
    step = message.split("` failed", 1)[0]
    if not step.endswith(" init " + step.rsplit(" ", 1)[-1]) or "exec:" not in message:
        return None
    if _NOT_FOUND in message or "no such file or directory" in message.lower():
        code = 127
    elif _DENIED in message.lower():
        code = 126
    else:
        return None
    raw = message.encode("utf-8")
    kept = raw[: output_max_bytes // 2]
    output = command_result(stdout=b"", stderr=kept, stdout_total=0, stderr_total=len(raw),
                            returncode=code, output_max_bytes=output_max_bytes)
    return RunOutcome(status="ok", output=output,
                      message=f"the program did not start (exit {code})")


async def run_command_container(
    podman: PodmanSettings,
    commands: CommandsSettings,
    *,
    name: str,
    uid: int,
    gid: int,
    rootless: bool,
    plan: CommandPlan,
    cwd: str,
    argv: Sequence[str],
    stdin: bytes | None,
    pidfile: str | None = None,
) -> RunOutcome:
    """One call (see above).  `pidfile`: a fresh path in a directory of brokerd's own
    for podman's ``--pidfile`` (spares the ``podman inspect`` step)."""
    create = build_command_create_argv(podman, commands, name=name, uid=uid, gid=gid,
                                       rootless=rootless, cwd=cwd, mounts=plan.mounts, argv=argv,
                                       pidfile=pidfile)
    identities = [MountIdentity(destination=d, dev=dev, ino=ino) for d, (dev, ino) in plan.roots]
    try:
        async with prepared_container(podman.podman, create, name, identities,
                                      pidfile=pidfile):
            done = await run_captured(podman.podman, name, stdin=stdin,
                                      keep_each=commands.output_max_bytes // 2,
                                      timeout_s=commands.timeout_ms / 1000)
    except PodmanCommandError as exc:
        program = _init_failure(str(exc), commands.output_max_bytes)
        if program is not None:
            return program
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"{exc}. {UNAVAILABLE}")
    except UnsafeTarget as exc:
        return RunOutcome(status="unsafe_target", output=None, message=str(exc))
    except OSError as exc:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"podman could not be started ({exc.strerror or exc}). "
                          f"{UNAVAILABLE}")
    return _outcome(done, commands)


async def run_command_hooked(
    podman: PodmanSettings,
    commands: CommandsSettings,
    *,
    name: str,
    uid: int,
    gid: int,
    plan: CommandPlan,
    cwd: str,
    argv: Sequence[str],
    stdin: bytes | None,
    scratch: Path,
    removals: Removals | None = None,
) -> RunOutcome:
    """One call on a rootful podman (see above).  `scratch`: a fresh directory private
    to brokerd for the FIFOs and the hooks directory (the caller removes it).

    `removals`: when it has room, the run has no ``--rm`` and a program that ran to
    its end leaves its exited container to be removed after the answer (the
    outcome's `after_answer` starts the removal; `Removals.drain` at the latest); anything
    else (a cancel, a refusal, a timeout, a failure) is removed before returning."""
    deferred = removals is not None and removals.room
    identities = [MountIdentity(destination=d, dev=dev, ino=ino) for d, (dev, ino) in plan.roots]
    hooks = scratch / "hooks.d"
    try:
        hooks.mkdir(mode=0o700)
        gate = Gate(scratch, identities, bundle_rootfs)
    except OSError as exc:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"the call could not be set up ({exc.strerror or exc}). "
                                  f"{UNAVAILABLE}")
    done: Captured | None = None
    release: Callable[[], None] | None = None
    ended = False  # the body ran to its end (no exception, no early return)
    try:
        (hooks / "call.json").write_text(json.dumps(hooks_dir_file(
            name, str(gate.state_fifo), str(gate.verdict_fifo))), encoding="utf-8")
        run = build_command_run_argv(podman, commands, hooks_dir=str(hooks), name=name, uid=uid,
                                     gid=gid, rootless=False, cwd=cwd, mounts=plan.mounts,
                                     argv=argv, remove=not deferred)
        process = await trio.lowlevel.open_process(
            run, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_environment())

        async def stop() -> None:
            await remove_container(podman.podman, name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(gate.serve)
            done = await capture(process, stdin=stdin, keep_each=commands.output_max_bytes // 2,
                                 timeout_s=commands.timeout_ms / 1000, stop=stop)
            nursery.cancel_scope.cancel()
        ended = True
    except OSError as exc:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"podman could not be started ({exc.strerror or exc}). "
                          f"{UNAVAILABLE}")
    finally:
        # Shielded: under a cancel, an unshielded close would raise before the removal.
        with trio.CancelScope(shield=True):
            await gate.aclose()
        if done is None or not gate.checked or done.timed_out:
            # `run --rm` removes what ran to its end; anything else is removed here.
            await remove_container(podman.podman, name)
        elif deferred:
            release = None if removals is None or not ended else removals.hold(name)
            if release is None:
                await remove_container(podman.podman, name)
    if gate.refused is not None:
        return RunOutcome(status="unsafe_target", output=None, message=str(gate.refused))
    if not gate.checked and not done.timed_out:
        err = escape_text(done.stderr[-2048:].decode("utf-8", "replace").strip())
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"podman could not run the container (exit "
                                  f"{done.returncode}): {err}. {UNAVAILABLE}")
    return attrs.evolve(_outcome(done, commands), after_answer=release)


def _outcome(done: Captured, commands: CommandsSettings) -> RunOutcome:
    if done.timed_out or done.returncode is None:
        return RunOutcome(status="timeout", output=None,
                          message=f"the command ran past {commands.timeout_ms} ms and was killed")
    output = command_result(stdout=done.stdout, stderr=done.stderr,
                            stdout_total=done.stdout_total, stderr_total=done.stderr_total,
                            returncode=done.returncode,
                            output_max_bytes=commands.output_max_bytes, stopped=done.overflow)
    return RunOutcome(status="ok", output=output)
