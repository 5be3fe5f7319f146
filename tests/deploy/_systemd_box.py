"""A rootful podman container with systemd as PID 1, for tests/deploy/test_systemd_real.py.

- `systemd_image()`: scripts/build-systemd-image (cached by content) -> its tag.
- `tools_archive()`: the tools image (scripts/build-tools-image) saved once per
  image id under ~/.cache/boxmaker/bxsd/, to be loaded by the podman inside.
- `host_cgroup_mounts()`: the host's cgroup mounts, to compare before and after.
- `Box`: one booted container (named bxsd-..., removed by `remove`), with
  `sh` (bash -c inside, checked), `popen`, `wait_running` and `sandbox`.

Host safety (issue 18): /sys/fs/cgroup is never bind-mounted, and systemd
always gets systemd.legacy_systemd_cgroup_controller=1 (without it, it turns
on nsdelegate on the host's cgroup2 mount).  `--cgroupns=private` gives the
container a cgroup namespace of its own, so the cgroup paths systemd and the
podman inside read match the hierarchies they see; without it nested podman
fails ("error mounting cgroup ... no such file or directory").
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

PODMAN = shutil.which("podman")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "boxmaker" / "bxsd"
BOOT_ARGS = ("/sbin/init", "systemd.legacy_systemd_cgroup_controller=1")


def unavailable(why: str) -> None:
    """Skip saying why; under BOXMAKER_CI=1 that is a failure."""
    if os.environ.get("BOXMAKER_CI") == "1":
        pytest.fail(why)
    pytest.skip(why)


def host_cgroup_mounts() -> list[str]:
    """Every cgroup mount of this (the host's) mount namespace, as mountinfo says it."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line for line in lines if " - cgroup" in line or "/sys/fs/cgroup" in line]


def _run(argv: list[str], *, timeout: float) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv[:3])} failed ({done.returncode}):\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout


def systemd_image() -> str:
    if PODMAN is None:
        unavailable("podman is not installed (scripts/get-podman)")
    if os.getuid() != 0:
        unavailable("booting systemd in a container needs rootful podman (run as root)")
    if shutil.which("mmdebstrap") is None:
        done = subprocess.run([str(REPO / "scripts/build-systemd-image"), "--check"],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            unavailable("mmdebstrap is not installed (scripts/get-podman)")
        return done.stdout.strip()
    return _run([str(REPO / "scripts/build-systemd-image")], timeout=1200).strip()


def tools_archive(image: str) -> Path:
    """The tools image as a `podman save` archive, made once per image id."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"tools-{image.removeprefix('sha256:')[:16]}.tar"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.part")
        _run(["podman", "save", "--quiet", "-o", str(partial), image], timeout=300)
        partial.chmod(0o644)  # the owner's rootless podman loads it too
        partial.rename(path)
        for old in CACHE.glob("tools-*.tar"):
            if old != path:
                old.unlink(missing_ok=True)
    return path


class Box:
    """A booted systemd container; everything inside runs through `podman exec`."""

    def __init__(self, image: str, mounts: dict[Path, str]) -> None:
        self.name = f"bxsd-test-{os.getpid()}-{secrets.token_hex(3)}"
        argv = ["podman", "run", "-d", "--name", self.name, "--privileged",
                "--cgroupns=private", "--network=none", "--systemd=always",
                "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768",
                # podman's vfs storage inside (root's and the owner's) in memory:
                # writing and removing it on disk took half a minute
                "--tmpfs", "/var/lib/containers:rw,mode=0700",
                "--tmpfs", "/home:rw,mode=0755"]
        for source, target in mounts.items():
            argv += ["-v", f"{source}:{target}:ro"]
        _run([*argv, image, *BOOT_ARGS], timeout=120)

    def sh(self, script: str, *, timeout: float = 120, check: bool = True,
           user: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = ["podman", "exec"]
        if user is not None:
            argv += ["--user", user]
        done = subprocess.run([*argv, self.name, "bash", "-c", script], capture_output=True,
                              text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"in the container: {script}\nexit {done.returncode}\n"
                                 f"{done.stdout[-6000:]}\n{done.stderr[-6000:]}")
        return done

    def out(self, script: str, **kwargs: object) -> str:
        return self.sh(script, **kwargs).stdout  # type: ignore[arg-type]

    def sandbox(self, unit: str) -> dict[str, str]:
        """What the kernel says of a unit's main process: no new privileges, seccomp
        mode, bounding and effective capabilities."""
        pid = self.out(f"systemctl show -p MainPID --value {unit}").strip()
        lines = self.out(f"grep -E '^(NoNewPrivs|Seccomp|CapBnd|CapEff):' /proc/{pid}/status")
        return dict(line.split(":\t", 1) for line in lines.splitlines())

    def popen(self, script: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["podman", "exec", self.name, "bash", "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_running(self, timeout: float = 120) -> str:
        """Until systemd answers on its private socket, then `is-system-running --wait`."""
        deadline = time.monotonic() + timeout
        while self.sh("test -S /run/systemd/private", check=False).returncode != 0:
            assert time.monotonic() < deadline, "systemd never opened /run/systemd/private"
            time.sleep(0.1)  # a real PID 1 booting: nothing to wait on but its socket
        return self.sh("systemctl is-system-running --wait", check=False,
                       timeout=timeout).stdout.strip()

    def remove(self) -> None:
        subprocess.run(["podman", "rm", "--force", "--time", "0", self.name],
                       capture_output=True, timeout=120, check=False)
