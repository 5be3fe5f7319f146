"""One `run_command` container, in podman's three steps (12-tool-sources): trio.

`run_command_container` takes a call's plan (`plan_command_call`) and runs:

1. ``podman create`` (`build_command_create_argv`); a failure is
   `runner_unavailable`: nothing ran;
2. ``podman init``; then, below ``/proc/<pid>/root``, each mount root is
   walked one component at a time with ``O_PATH | O_NOFOLLOW`` and its
   ``(st_dev, st_ino)`` compared with the host walk's: a difference or a link
   is `unsafe_target` and the program never starts.  An init that fails
   because the program is missing or not executable (runc looks it up at
   create) is the program's failure: `ok` with exit 127 or 126 and podman's
   message as stderr (docs/decisions.md); any other init failure is
   `runner_unavailable`;
3. ``podman start --attach --interactive`` with the call's stdin (closed at
   once when there is none); stdout and stderr read concurrently through an
   `OutputKeeper` each (half of `output_max_bytes` kept); past
   `PAST_CAP_BYTES` the container is killed and the result says
   ``truncated``; after `timeout_ms` it is killed and the outcome is
   `timeout` (output null).

Whatever happens the container is removed (``podman rm --force --time 0``),
shielded from cancellation.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import Sequence

import trio

from ..._commands_config import CommandsSettings
from ..._sd import child_environment
from ...proto._escape import escape_text
from ._command_argv import (
    build_command_create_argv,
    command_init_argv,
    command_pid_argv,
    command_rm_argv,
    command_start_argv,
)
from ._command_mounts import CommandPlan
from ._command_result import OutputKeeper, command_result
from ._podman_argv import KILL_GRACE_S, UNAVAILABLE, PodmanSettings
from ._spec import RunOutcome

STEP_TIMEOUT_S = 60.0
"""create, init and inspect each (podman's own work, not the program's)."""
_NOT_FOUND = "executable file not found in $PATH"
_NO_SUCH_FILE = "no such file or directory"
_DENIED = "permission denied"


async def _step(argv: Sequence[str]) -> tuple[int, bytes, bytes]:
    with trio.fail_after(STEP_TIMEOUT_S):
        done = await trio.run_process(
            list(argv), capture_stdout=True, capture_stderr=True, check=False,
            env=child_environment(),
        )
    return done.returncode, bytes(done.stdout), bytes(done.stderr)


def _unavailable(what: str, stderr: bytes) -> RunOutcome:
    err = escape_text(stderr[-2048:].decode("utf-8", "replace").strip(), keep_newlines=False)
    return RunOutcome(status="runner_unavailable", output=None,
                      message=f"podman {what} failed: {err}. {UNAVAILABLE}")


def identity_below(pid: int, destination: str) -> tuple[int, int]:
    """``(st_dev, st_ino)`` of `destination` inside the process's root, walked with
    ``O_PATH | O_NOFOLLOW`` one component at a time; OSError or ValueError (a link)."""
    fd = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in destination.strip("/").split("/"):
            nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise ValueError(f"{destination}: a symbolic link inside the container")
        st = os.fstat(fd)
        return (st.st_dev, st.st_ino)
    finally:
        os.close(fd)


def _init_failure(stderr: bytes, output_max_bytes: int) -> RunOutcome:
    text = stderr.decode("utf-8", "replace")
    lowered = text.lower()
    if _NOT_FOUND in text or (_NO_SUCH_FILE in lowered and "exec:" in lowered):
        code = 127
    elif _DENIED in lowered and "exec:" in lowered:
        code = 126
    else:
        return _unavailable("init", stderr)
    kept = stderr[: output_max_bytes // 2]
    output = command_result(stdout=b"", stderr=kept, stdout_total=0, stderr_total=len(stderr),
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
    """The three steps and the result (see above).

    `pidfile`: a path in a directory of brokerd's own where podman writes the init
    process id (``--pidfile``); without it the id is asked of ``podman inspect``."""
    create = build_command_create_argv(podman, commands, name=name, uid=uid, gid=gid,
                                       rootless=rootless, cwd=cwd, mounts=plan.mounts, argv=argv,
                                       pidfile=pidfile)
    try:
        code, _, err = await _step(create)
        if code != 0:
            return _unavailable("create", err)
        code, _, err = await _step(command_init_argv(podman, name))
        if code != 0:
            return _init_failure(err, commands.output_max_bytes)
        if pidfile is not None:
            try:
                with open(pidfile, "rb") as file:
                    out, err = file.read(32), b"the pid file does not hold a process id"
            except OSError as exc:
                out, err = b"", f"the pid file cannot be read ({exc.strerror})".encode()
            what = "init (pid file)"
        else:
            code, out, err = await _step(command_pid_argv(podman, name))
            out = out if code == 0 else b""
            what = "inspect"
        if not out.strip().isdigit():
            return _unavailable(what, err)
        pid = int(out.strip())
        for destination, ident in plan.roots:
            try:
                found = identity_below(pid, destination)
            except (OSError, ValueError) as exc:
                return RunOutcome(status="unsafe_target", output=None,
                                  message=f"the mount is not what was checked ({exc})")
            if found != ident:
                return RunOutcome(status="unsafe_target", output=None,
                                  message=f"the mount is not what was checked: {destination}")
        return await _start(podman, commands, name, stdin)
    except OSError as exc:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"podman could not be started ({exc.strerror or exc}). "
                          f"{UNAVAILABLE}")
    except trio.TooSlowError:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"a podman step took longer than {STEP_TIMEOUT_S:.0f} s. "
                          f"{UNAVAILABLE}")
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            await trio.run_process(command_rm_argv(podman, name), capture_stdout=True,
                                   capture_stderr=True, check=False, env=child_environment())


async def _start(podman: PodmanSettings, commands: CommandsSettings, name: str,
                 stdin: bytes | None) -> RunOutcome:
    half = commands.output_max_bytes // 2
    keepers = (OutputKeeper(half), OutputKeeper(half))
    stopped = False
    process = await trio.lowlevel.open_process(
        command_start_argv(podman, name), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=child_environment(),
    )
    assert process.stdin and process.stdout and process.stderr
    try:
        with trio.move_on_after(commands.timeout_ms / 1000) as scope:

            async def feed() -> None:
                assert process.stdin
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    if stdin:
                        await process.stdin.send_all(stdin)
                await process.stdin.aclose()

            async def collect(stream: trio.abc.ReceiveStream, keeper: OutputKeeper) -> None:
                nonlocal stopped
                while chunk := await stream.receive_some(65536):
                    if not keeper.feed(bytes(chunk)) and not stopped:
                        stopped = True
                        await _remove(podman, name)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(feed)
                nursery.start_soon(collect, process.stdout, keepers[0])
                nursery.start_soon(collect, process.stderr, keepers[1])
            await process.wait()
        if scope.cancelled_caught:
            await _remove(podman, name)
            with trio.move_on_after(KILL_GRACE_S):
                await process.wait()
            return RunOutcome(status="timeout", output=None,
                              message=f"the command ran past {commands.timeout_ms} ms "
                              "and was killed")
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()
            for pipe in (process.stdin, process.stdout, process.stderr):
                await pipe.aclose()
    out, err = keepers
    assert process.returncode is not None
    output = command_result(stdout=out.kept, stderr=err.kept, stdout_total=out.total,
                            stderr_total=err.total, returncode=process.returncode,
                            output_max_bytes=commands.output_max_bytes, stopped=stopped)
    return RunOutcome(status="ok", output=output)


async def _remove(podman: PodmanSettings, name: str) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(30):
        await trio.run_process(command_rm_argv(podman, name), capture_stdout=True,
                               capture_stderr=True, check=False, env=child_environment())
