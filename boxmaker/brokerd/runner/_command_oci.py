"""One `run_command` container on the oci launcher (issue 25): trio.

The same call as `_command_run.run_command_container` (podman's three
steps), with the OCI runtime run directly on a bundle brokerd writes:

1. a fresh bundle whose root is an overlay over the commands image, mounted
   once per brokerd (`OciRuntime.call_bundle`), and its ``config.json``
   (`_command_oci_config.build_command_config`);
2. ``runc --root STATE --log LOG --log-format json run --bundle B NAME``, its
   stdin, stdout and stderr the program's (`_three_steps.capture`: fed,
   capped, counted, killed past the bound or the timeout);
3. in the place of podman's ``init``: runc's ``createRuntime`` hook hands
   brokerd the container's init process id once every mount is in place and
   before anything of the call's runs; brokerd walks each mount root below
   ``/proc/<pid>/root`` (`check_mount_identities`, under the bundle's root)
   and answers the hook: ``ok`` lets runc go on, ``no`` (or no answer) fails
   the container before its program is looked up.

runc's own failures are told from the program's by runc's log (an entry at
level error): a program that is missing (not executable) is exit 127 (126)
as on the podman path; any other is ``runner_unavailable``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import trio

from ..._commands_config import CommandsSettings
from ..._sockets._sd import child_environment
from ...proto._escape import escape_text
from ._command_mounts import CommandPlan
from ._command_oci_config import build_command_config
from ._command_result import command_result
from ._hook_gate import Gate
from ._oci import OciRuntime
from ._podman_argv import UNAVAILABLE
from ._spec import RunOutcome
from ._three_steps import MountIdentity, capture

LOG_MAX_BYTES = 64 * 1024
_NOT_FOUND = "executable file not found in $PATH"


def runtime_error(log: bytes) -> str | None:
    """The message of the first entry at level error (or fatal) of runc's JSON log."""
    for raw in log.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal"):
            message = entry.get("msg")
            return str(message) if message is not None else "(no message)"
    return None


def _read_log(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(LOG_MAX_BYTES)
    except FileNotFoundError:
        return b""


def _failure(message: str, checked: bool, output_max_bytes: int) -> RunOutcome:
    """runc failed: the program's fault (missing, not executable) or the runner's."""
    lowered = message.lower()
    code = None
    if checked and "exec:" in message:
        if _NOT_FOUND in message or "no such file or directory" in lowered:
            code = 127
        elif "permission denied" in lowered:
            code = 126
    if code is None:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"the OCI runtime could not run the container: "
                                  f"{escape_text(message[:2048])}. {UNAVAILABLE}")
    raw = message.encode("utf-8")
    output = command_result(stdout=b"", stderr=raw[: output_max_bytes // 2], stdout_total=0,
                            stderr_total=len(raw), returncode=code,
                            output_max_bytes=output_max_bytes)
    return RunOutcome(status="ok", output=output,
                      message=f"the program did not start (exit {code})")


async def run_command_bundle(
    oci: OciRuntime,
    commands: CommandsSettings,
    *,
    lower: str,
    name: str,
    uid: int,
    gid: int,
    plan: CommandPlan,
    cwd: str,
    argv: Sequence[str],
    stdin: bytes | None,
) -> RunOutcome:
    """One call (see above); `lower`: the commands image's mount."""
    identities = [MountIdentity(destination=d, dev=dev, ino=ino) for d, (dev, ino) in plan.roots]
    try:
        async with oci.call_bundle(name, lower) as bundle:
            config = build_command_config(
                oci.settings, commands, rootfs=os.fspath(bundle / "rootfs"),
                cgroups_path=f"/boxmaker-{oci.instance}/{name}", uid=uid, gid=gid, cwd=cwd,
                mounts=plan.mounts, argv=argv, seccomp=oci.seccomp_config,
                state_fifo=os.fspath(bundle / "hook-state"),
                verdict_fifo=os.fspath(bundle / "hook-verdict"))
            (bundle / "config.json").write_text(json.dumps(config), encoding="utf-8")
            under = os.path.realpath(bundle / "rootfs")
            gate = Gate(bundle, identities, lambda _state: under)
            log = bundle / "runtime.log"
            try:
                process = await trio.lowlevel.open_process(
                    oci.runtime_argv("--log", os.fspath(log), "--log-format", "json", "run",
                                     "--bundle", os.fspath(bundle), name),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=child_environment())

                async def stop() -> None:
                    await oci.kill_container(name)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(gate.serve)
                    done = await capture(process, stdin=stdin,
                                         keep_each=commands.output_max_bytes // 2,
                                         timeout_s=commands.timeout_ms / 1000, stop=stop)
                    nursery.cancel_scope.cancel()
            finally:
                await gate.aclose()
            error = runtime_error(await trio.to_thread.run_sync(_read_log, log))
    except OSError as exc:
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"the container could not be set up ({exc.strerror or exc}). "
                                  f"{UNAVAILABLE}")
    if gate.refused is not None:
        return RunOutcome(status="unsafe_target", output=None, message=str(gate.refused))
    if done.timed_out or done.returncode is None:
        return RunOutcome(status="timeout", output=None,
                          message=f"the command ran past {commands.timeout_ms} ms and was killed")
    if error is not None:
        return _failure(error, gate.checked, commands.output_max_bytes)
    if not gate.checked:
        # runc ran nothing without the hook's verdict; an exit without one is runc's.
        return RunOutcome(status="runner_unavailable", output=None,
                          message=f"the OCI runtime ended before the mounts were checked "
                                  f"(exit {done.returncode}). {UNAVAILABLE}")
    output = command_result(stdout=done.stdout, stderr=done.stderr,
                            stdout_total=done.stdout_total, stderr_total=done.stderr_total,
                            returncode=done.returncode,
                            output_max_bytes=commands.output_max_bytes, stopped=done.overflow)
    return RunOutcome(status="ok", output=output)
