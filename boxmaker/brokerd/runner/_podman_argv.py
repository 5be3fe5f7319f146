"""The podman argument list and the toolkit's request and answer (08-runner), pure.

The argument list is built as a list (never a shell string) from
`PodmanSettings` and one call's mounts; golden files under fixtures/runner/
pin it.  `build_request` is what goes to the toolkit on stdin and
`parse_answer` reads its one JSON answer.  No I/O here.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from ..._error_table import ERROR_RUNBOOKS
from ..._seccomp import seccomp_profile
from ...proto._errors import DecodeError
from ...proto._escape import escape_text
from ...proto._json import dumps, loads_object
from ._mounts import Mount
from ._spec import RunOutcome

UNAVAILABLE = f"See {ERROR_RUNBOOKS['runner_unavailable']}"
# Inside the container: where the per-call egress directory is mounted.
EGRESS_MOUNT = "/run/boxmaker-egress"
EGRESS_SOCKET_NAME = "socks"
# --unsetenv-all leaves no PATH; this fixed one (not the host's) lets the
# argument list name `python3` as 08-runner writes it.
CONTAINER_PATH = "/usr/bin:/bin"
KILL_GRACE_S = 2.0
MOUNT_MISMATCH = "mount_mismatch"
STDERR_KEEP_BYTES = 16 * 1024
_MEMORY_RE = re.compile(r"[1-9][0-9]{0,12}[bkmg]?")
_IMAGE_RE = re.compile(r"sha256:[0-9a-f]{64}")


def _check_image(_i: Any, _a: Any, value: str) -> None:
    if not _IMAGE_RE.fullmatch(value):
        raise ValueError(
            "runner.image must name the tools image by digest (sha256: and 64 hex digits), "
            "never by tag"
        )


def _check_memory(_i: Any, _a: Any, value: str) -> None:
    if not _MEMORY_RE.fullmatch(value):
        raise ValueError("runner.memory must be a size like 256m")


def _positive_int(limit: int) -> Any:
    def check(_i: Any, attribute: Any, value: int) -> None:
        if isinstance(value, bool) or not 1 <= value <= limit:
            raise ValueError(f"runner.{attribute.name} must be 1..{limit}")

    return check


def _check_cpus(_i: Any, _a: Any, value: float) -> None:
    if not math.isfinite(value) or not 0.01 <= value <= 1024:
        raise ValueError("runner.cpus must be 0.01..1024")


def _check_output_max(_i: Any, _a: Any, value: int) -> None:
    if isinstance(value, bool) or not 4096 <= value <= 64 * 1024 * 1024:
        raise ValueError("runner.output_max_bytes must be 4096..67108864")


def _check_seccomp(_i: Any, _a: Any, value: str) -> None:
    if not value.startswith("/") or "\0" in value:
        raise ValueError("the seccomp profile must be an absolute path")


@attrs.frozen(kw_only=True)
class PodmanSettings:
    """The podman keys of brokerd.toml's [runner] table (08-runner)."""

    image: str = attrs.field(validator=_check_image)
    podman: str = "podman"
    oci_runtime: str | None = None
    memory: str = attrs.field(default="256m", validator=_check_memory)
    pids: int = attrs.field(default=64, validator=_positive_int(1 << 20))
    cpus: float = attrs.field(default=1.0, validator=_check_cpus)
    timeout_ms: int = attrs.field(default=30_000, validator=_positive_int(86_400_000))
    output_max_bytes: int = attrs.field(default=2_097_152, validator=_check_output_max)
    nofile: int = attrs.field(default=1024, validator=_positive_int(1 << 20))
    nproc: int = attrs.field(default=512, validator=_positive_int(1 << 22))
    launcher: Literal["podman", "oci"] | None = None
    """`[runner] launcher`: "oci" runs each call's container with the OCI runtime on a
    bundle brokerd writes (`_oci`), "podman" with ``podman run --rm``; None (the key
    unset) the oci launcher with podman's where it cannot (`OciRuntime.explicit`)."""
    seccomp: str = attrs.field(factory=lambda: str(seccomp_profile()), validator=_check_seccomp)
    """boxmaker's own seccomp profile (`boxmaker._seccomp`); not a brokerd.toml key."""


def instance_id(home: Path) -> str:
    """First 8 hex digits of SHA-256 of brokerd's home path (08-runner)."""
    return hashlib.sha256(os.fsencode(home)).hexdigest()[:8]


def container_prefix(instance: str) -> str:
    return f"boxmaker-{instance}-call-"


def container_name(instance: str, call_id: int | str) -> str:
    return f"{container_prefix(instance)}{call_id}"


def podman_command_prefix(settings: PodmanSettings) -> list[str]:
    """podman, and its ``--runtime`` when one is configured."""
    argv = [settings.podman]
    if settings.oci_runtime:
        argv += ["--runtime", settings.oci_runtime]
    return argv


def confinement_flags(settings: PodmanSettings, *, uid: int, gid: int,
                      rootless: bool) -> list[str]:
    """The wall every container of brokerd's gets: no network, a read-only root,
    no capabilities, no new privileges, the seccomp profile, brokerd's uid."""
    flags = [
        "--network=none",
        "--read-only",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        # No new namespaces (issue 22 item 8): podman's default plus that rule.
        "--security-opt",
        f"seccomp={settings.seccomp}",
        "--user",
        f"{uid}:{gid}",
    ]
    if rootless:
        flags.append("--userns=keep-id")
    return flags


def build_argv(
    settings: PodmanSettings,
    *,
    name: str,
    uid: int,
    gid: int,
    rootless: bool,
    mounts: Sequence[Mount],
    command: Sequence[str],
) -> list[str]:
    """The podman argument list for one container (golden files: fixtures/runner/)."""
    argv = podman_command_prefix(settings)
    argv += ["run", "--rm", "--pull=never", "--name", name]
    argv += confinement_flags(settings, uid=uid, gid=gid, rootless=rootless)
    argv += [
        "--memory",
        settings.memory,
        "--pids-limit",
        str(settings.pids),
        "--cpus",
        repr(float(settings.cpus)),
        "--ulimit",
        f"nofile={settings.nofile}:{settings.nofile}",
        "--ulimit",
        f"nproc={settings.nproc}:{settings.nproc}",
        "--tmpfs",
        "/tmp:size=16m",
        # Sized like /tmp: with --read-only podman would mount them unsized.
        "--tmpfs",
        "/var/tmp:size=16m",
        "--tmpfs",
        "/run:size=16m",
        "--unsetenv-all",
        "--env",
        f"PATH={CONTAINER_PATH}",
        # Imports come only from the image: not from the working directory
        # (a grant mounted at /boxmaker would shadow the toolkit) and not from
        # ~/.local (a write grant on the owner's home could plant one).
        "--env",
        "PYTHONSAFEPATH=1",
        "--env",
        "PYTHONNOUSERSITE=1",
        # No log file: what a tool prints (file contents) is never kept on disk.
        "--log-driver=none",
        "--interactive",
    ]
    for mount in mounts:
        argv += ["--mount", mount.argument()]
    argv.append(settings.image)
    argv += list(command)
    return argv


def toolkit_command(tool: str) -> list[str]:
    return ["python3", "-m", "boxmaker.toolkit", tool]


def build_request(
    args: dict[str, Any],
    output_max_bytes: int,
    egress_socket: str | None,
    checked: dict[str, Any] | None = None,
) -> bytes:
    """The toolkit's stdin: ``{"args", "limits": {"output_max_bytes"}, "egress"?, "checked"?}``.

    `checked` (file tools): the mount root's and the target's ``(st_dev,
    st_ino)`` as brokerd's host walk found them; the toolkit compares.
    """
    request: dict[str, Any] = {"args": args, "limits": {"output_max_bytes": output_max_bytes}}
    if egress_socket is not None:
        request["egress"] = {"socket": egress_socket}
    if checked is not None:
        request["checked"] = checked
    return dumps(request).encode("utf-8")


def parse_answer(stdout: bytes) -> RunOutcome | None:
    """The toolkit's answer as an outcome, or None when it is not one."""
    try:
        answer = loads_object(stdout)
    except DecodeError:
        return None
    if set(answer) == {"ok"} and isinstance(answer["ok"], dict):
        return RunOutcome(status="ok", output=answer["ok"])
    if set(answer) == {"error"}:
        err = answer["error"]
        if (
            isinstance(err, dict)
            and set(err) == {"code", "message"}
            and isinstance(err["code"], str)
            and isinstance(err["message"], str)
        ):
            if err["code"] == MOUNT_MISMATCH:
                # The mount was not what brokerd checked: the tool did nothing.
                return RunOutcome(
                    status="unsafe_target",
                    output=None,
                    message=f"{MOUNT_MISMATCH}: {escape_text(err['message'])}",
                )
            return RunOutcome(
                status="tool_failed", output={"error": err}, message=escape_text(err["message"])
            )
    return None


def tool_failed(code: str, message: str) -> RunOutcome:
    return RunOutcome(
        status="tool_failed", output={"error": {"code": code, "message": message}}, message=message
    )
