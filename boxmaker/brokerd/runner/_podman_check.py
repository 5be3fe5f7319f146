"""brokerd's start-up check of podman and the tools image (08-runner).

At start brokerd checks that podman runs, that the image with the configured
digest exists locally, and that the limits will be enforced (a rootless podman
on cgroup v1 or hybrid cgroups silently ignores --memory, --pids-limit and
--cpus).  If not, it still serves, but every allowed call answers
runner_unavailable and `bxctl status` shows the reason.  The check ends with a
trial run of the image with the real argument list.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Sequence

import attrs
import trio

from ..._error_table import ERROR_RUNBOOKS
from ..._errors import UnavailableError
from ..._sockets._sd import child_environment
from ...proto._escape import escape_text

log = logging.getLogger("boxmaker.brokerd.runner.podman")

_COMMAND_TIMEOUT_S = 60.0
_STDERR_KEEP = 4096
INFO_TRIES = 3
INFO_PAUSE_S = 1.0
REQUIRED_CONTROLLERS = ("memory", "pids", "cpu")


class PodmanCommandError(UnavailableError):
    """A podman command could not run or failed (the environment's fault)."""

    wire_code = "runner_unavailable"
    runbook = "docs/runbook.md#runner-unavailable"


@attrs.frozen(kw_only=True)
class PodmanCheck:
    """What the start-up check found: `ok`, the image, and why not when not."""

    ok: bool
    image: str
    reason: str | None
    rootless: bool = False


@attrs.frozen(kw_only=True)
class PodmanInfo:
    rootless: bool
    cgroup_version: str
    controllers: tuple[str, ...]
    oci_runtime: str


async def podman_command(
    argv: Sequence[str], *, timeout_s: float = _COMMAND_TIMEOUT_S, stdin: bytes = b""
) -> bytes:
    """Run a short podman command; its stdout, or PodmanCommandError."""
    try:
        with trio.fail_after(timeout_s):
            done = await trio.run_process(
                list(argv), stdin=stdin, capture_stdout=True, capture_stderr=True, check=False,
                env=child_environment(),
            )
    except OSError as exc:
        raise PodmanCommandError(f"{argv[0]} could not be started ({exc.strerror or exc})") from exc
    except trio.TooSlowError as exc:
        raise PodmanCommandError(f"`{' '.join(argv[:3])}` did not finish in time") from exc
    if done.returncode != 0:
        err = escape_text(done.stderr[-_STDERR_KEEP:].decode("utf-8", "replace").strip())
        raise PodmanCommandError(f"`{' '.join(argv[:3])}` failed (exit {done.returncode}): {err}")
    return bytes(done.stdout)


def parse_info(raw: bytes) -> PodmanInfo:
    """The parts of `podman info --format json` the check needs."""
    try:
        info = json.loads(raw)
        host = info["host"]
        controllers = host.get("cgroupControllers") or []
        return PodmanInfo(
            rootless=bool(host["security"]["rootless"]),
            cgroup_version=str(host["cgroupVersion"]),
            controllers=tuple(str(c) for c in controllers),
            oci_runtime=str(host.get("ociRuntime", {}).get("name", "")),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PodmanCommandError("`podman info` gave an answer this brokerd cannot read") from exc


def limits_problem(info: PodmanInfo) -> str | None:
    """Why podman would not enforce --memory/--pids-limit/--cpus, or None."""
    if info.cgroup_version != "v2" and info.rootless:
        return (
            f"podman is rootless on cgroup {info.cgroup_version}, where it silently ignores "
            "--memory, --pids-limit and --cpus"
        )
    missing = [c for c in REQUIRED_CONTROLLERS if c not in info.controllers]
    if missing:
        return f"the cgroup controllers {', '.join(missing)} are not available to podman"
    return None


async def podman_info_answer(podman: str, *, tries: int = INFO_TRIES,
                             pause_s: float = INFO_PAUSE_S) -> bytes:
    """`podman info --format json`, asked again when it fails.

    A podman whose lock a killed brokerd's containers still hold can fail once
    and answer a second later; the last failure is raised.
    """
    deadline = trio.current_time() + _COMMAND_TIMEOUT_S  # all tries together
    for attempt in range(tries):
        left = deadline - trio.current_time()
        try:
            return await podman_command([podman, "info", "--format", "json"],
                                        timeout_s=max(left, 0.001))
        except PodmanCommandError:
            if attempt == tries - 1 or deadline - trio.current_time() <= pause_s:
                raise
            await trio.sleep(pause_s * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


async def check_podman(podman: str, image: str, trial_argv: Sequence[str] | None) -> PodmanCheck:
    """The start-up check; `trial_argv` (built for the same image) runs last when given."""

    def fail(reason: str, rootless: bool = False) -> PodmanCheck:
        return PodmanCheck(
            ok=False,
            image=image,
            reason=f"{reason}. See {ERROR_RUNBOOKS['runner_unavailable']}",
            rootless=rootless,
        )

    try:
        info = parse_info(await podman_info_answer(podman))
    except PodmanCommandError as exc:
        return fail(f"podman does not run: {exc}")
    problem = limits_problem(info)
    if problem is not None:
        return fail(problem, info.rootless)
    try:
        await podman_command([podman, "image", "exists", image])
    except PodmanCommandError:
        return fail(f"the tools image {image} is not in podman's local storage", info.rootless)
    if trial_argv is not None:
        try:
            await podman_command(trial_argv)
        except PodmanCommandError as exc:
            return fail(f"a trial run of the tools image failed: {exc}", info.rootless)
    return PodmanCheck(ok=True, image=image, reason=None, rootless=info.rootless)


async def remove_leftovers(podman: str, prefix: str) -> list[str]:
    """Remove this installation's containers named `prefix`* that a crash left behind.

    Returns the names removed.  Nothing is recorded in the audit log: it already
    shows those calls as unfinished.
    """
    killed = await trio.to_thread.run_sync(kill_orphan_creators, prefix)
    if killed:
        log.warning("killed %d podman process(es) a crashed brokerd left creating %s* "
                    "containers: pids %s", len(killed), prefix, killed)
    raw = await podman_command(
        [podman, "ps", "--all", "--filter", f"name=^{prefix}", "--format", "{{.Names}}"]
    )
    names = [n for n in raw.decode("utf-8", "replace").split() if n.startswith(prefix)]
    if names:
        await podman_command([podman, "rm", "--force", "--ignore", "--time", "0", *names])
        log.warning("removed %d leftover tool container(s): %s", len(names), ", ".join(names))
    return names


def kill_orphan_creators(prefix: str) -> list[int]:
    """SIGKILL every podman process of this uid (not brokerd's own child) whose arguments
    name a `prefix`* container, and return their pids.

    A brokerd killed with SIGKILL leaves its ``podman run`` children running; one that
    was still creating its container when the next brokerd swept would create it after
    the sweep, and then die on its closed pipes before removing it.  Killing the
    creators first makes the sweep's list final.  (Under systemd the unit's cgroup is
    killed with brokerd and none are left.)"""
    me, uid = os.getpid(), os.getuid()
    killed = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        if not _names_a_container(pid, prefix, uid, me):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        killed.append(pid)
    return sorted(killed)


def _status(pid: int) -> tuple[int, int] | None:
    """(real uid, parent pid) of `pid`, None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            status = file.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = dict(line.partition(":")[::2] for line in status.splitlines())
    try:
        return int(fields.get("Uid", "").split()[0]), int(fields.get("PPid", "").strip())
    except (IndexError, ValueError):
        return None


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):  # bounded: a pid chain this deep is not brokerd's
        found = _status(pid)
        if found is None or found[1] <= 1:
            return False
        if found[1] == ancestor:
            return True
        pid = found[1]
    return False


def _names_a_container(pid: int, prefix: str, uid: int, me: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            argv = file.read().split(b"\0")
    except OSError:
        return False
    found = _status(pid)
    if found is None or found[0] != uid or os.path.basename(argv[0]) != b"podman":
        return False
    if _descends_from(pid, me):  # brokerd's own calls (rootless podman re-executes itself)
        return False
    wanted = os.fsencode(prefix)
    return any(arg.startswith(wanted) or arg.startswith(b"--name=" + wanted)
               for arg in argv[1:])
