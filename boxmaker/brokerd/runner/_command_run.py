"""One `run_command` container, in podman's three steps (12-tool-sources): trio.

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

from collections.abc import Sequence

from ..._commands_config import CommandsSettings
from ._command_argv import build_command_create_argv
from ._command_mounts import CommandPlan
from ._command_result import command_result
from ._mounts import UnsafeTarget
from ._podman_argv import UNAVAILABLE, PodmanSettings
from ._podman_check import PodmanCommandError
from ._spec import RunOutcome
from ._three_steps import MountIdentity, prepared_container, run_captured

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
    if done.timed_out or done.returncode is None:
        return RunOutcome(status="timeout", output=None,
                          message=f"the command ran past {commands.timeout_ms} ms and was killed")
    output = command_result(stdout=done.stdout, stderr=done.stderr,
                            stdout_total=done.stdout_total, stderr_total=done.stderr_total,
                            returncode=done.returncode,
                            output_max_bytes=commands.output_max_bytes, stopped=done.overflow)
    return RunOutcome(status="ok", output=output)
