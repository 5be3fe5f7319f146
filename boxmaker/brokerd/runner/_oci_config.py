"""The OCI launcher's ``config.json`` for one call (issue 23 goal 1), pure.

What ``podman run`` with the runner's argument list (`_podman_argv.build_argv`)
hands its OCI runtime, written by brokerd itself: the same process (user,
arguments, the three variables, no capability, no new privileges, nofile and
nproc), the same mounts (/proc, /dev, /sys read-only, the sized tmpfs on /tmp,
/var/tmp and /run, each call's bind mounts non-recursive with nosuid, nodev
and noexec), the same limits (memory and swap, pids, cpu quota), podman's
masked and read-only /proc and /sys paths (copied from the configuration
podman 4.3 writes), the one seccomp profile in the runtime-spec form
(`boxmaker._seccomp.oci_seccomp`) and new pid, network, ipc, uts, mount and
cgroup namespaces (no user namespace: the launcher is rootful only).  A golden
file under fixtures/runner/ pins it.  No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from ._mounts import Mount
from ._podman_argv import CONTAINER_PATH, PodmanSettings

OCI_VERSION = "1.0.2-dev"
HOSTNAME = "boxmaker"
# podman 4.3's lists (containers/common config defaults), as its config.json shows them.
MASKED_PATHS = (
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/fs/selinux",
    "/sys/dev/block",
)
READONLY_PATHS = (
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
)
NAMESPACES = ("pid", "network", "ipc", "uts", "mount", "cgroup")
TMPFS_SIZE = "16m"
_CPU_PERIOD = 100_000
_UNITS = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_MEMORY_RE = re.compile(r"([1-9][0-9]{0,12})([bkmg]?)")


def memory_bytes(memory: str) -> int:
    """``256m`` as bytes (podman's reading of --memory); ValueError otherwise."""
    match = _MEMORY_RE.fullmatch(memory)
    if match is None:
        raise ValueError("runner.memory must be a size like 256m")
    return int(match.group(1)) * _UNITS[match.group(2) or "b"]


def _tmpfs(destination: str, size: str) -> dict[str, Any]:
    return {"destination": destination, "type": "tmpfs", "source": "tmpfs",
            "options": [f"size={size}", "rw", "rprivate", "nosuid", "nodev"]}


def _system_mounts(tmpfs_size: str) -> list[dict[str, Any]]:
    return [
        {"destination": "/proc", "type": "proc", "source": "proc",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "noexec", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
         "options": ["rprivate", "nosuid", "noexec", "nodev", "relatime", "ro"]},
        _tmpfs("/tmp", tmpfs_size),
        _tmpfs("/var/tmp", tmpfs_size),
        _tmpfs("/run", tmpfs_size),
    ]


def bind_mount(mount: Mount) -> dict[str, Any]:
    """One call mount: ``bind`` (not ``rbind``: not recursive), nosuid, nodev, and
    noexec unless the mount says otherwise (run_command's grant entries)."""
    options = ["ro" if mount.read_only else "rw", "bind", "nosuid", "nodev"]
    if mount.noexec:
        options.append("noexec")
    return {"destination": mount.destination, "type": "bind", "source": mount.source,
            "options": [*options, "rprivate"]}


@attrs.frozen(kw_only=True)
class Process:
    """What differs between the toolkit's and a command's process and limits."""

    args: tuple[str, ...]
    env: tuple[str, ...]
    cwd: str
    memory: str
    pids: int
    cpus: float
    tmpfs_size: str


def build_config(
    settings: PodmanSettings,
    *,
    rootfs: str,
    cgroups_path: str,
    uid: int,
    gid: int,
    mounts: Sequence[Mount],
    command: Sequence[str],
    seccomp: dict[str, Any],
) -> dict[str, Any]:
    """The runtime-spec configuration of one toolkit container (golden: fixtures/runner/oci-*)."""
    process = Process(
        args=tuple(command),
        env=(f"PATH={CONTAINER_PATH}", "PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1",
             f"HOME={'/root' if uid == 0 else '/'}", f"HOSTNAME={HOSTNAME}"),
        cwd="/", memory=settings.memory, pids=settings.pids, cpus=settings.cpus,
        tmpfs_size=TMPFS_SIZE)
    return container_config(settings, process, rootfs=rootfs, cgroups_path=cgroups_path,
                            uid=uid, gid=gid, mounts=mounts, seccomp=seccomp)


def container_config(
    settings: PodmanSettings,
    process: Process,
    *,
    rootfs: str,
    cgroups_path: str,
    uid: int,
    gid: int,
    mounts: Sequence[Mount],
    seccomp: dict[str, Any],
) -> dict[str, Any]:
    """The wall every oci container of brokerd's gets, around `process` (no I/O)."""
    memory = memory_bytes(process.memory)
    return {
        "ociVersion": OCI_VERSION,
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid, "umask": 0o022},
            "args": list(process.args),
            "env": list(process.env),
            "cwd": process.cwd,
            "capabilities": {"bounding": [], "effective": [], "inheritable": [],
                             "permitted": [], "ambient": []},
            "rlimits": [
                {"type": "RLIMIT_NOFILE", "hard": settings.nofile, "soft": settings.nofile},
                {"type": "RLIMIT_NPROC", "hard": settings.nproc, "soft": settings.nproc},
            ],
            "noNewPrivileges": True,
        },
        "root": {"path": rootfs, "readonly": True},
        "hostname": HOSTNAME,
        "mounts": _system_mounts(process.tmpfs_size) + [bind_mount(m) for m in mounts],
        "linux": {
            "sysctl": {"net.ipv4.ping_group_range": "0 0"},
            "resources": {
                "devices": [{"allow": False, "access": "rwm"}],
                "memory": {"limit": memory, "swap": 2 * memory},
                "cpu": {"quota": round(process.cpus * _CPU_PERIOD), "period": _CPU_PERIOD},
                "pids": {"limit": process.pids},
            },
            "cgroupsPath": cgroups_path,
            "namespaces": [{"type": kind} for kind in NAMESPACES],
            "seccomp": seccomp,
            "maskedPaths": list(MASKED_PATHS),
            "readonlyPaths": list(READONLY_PATHS),
        },
    }
