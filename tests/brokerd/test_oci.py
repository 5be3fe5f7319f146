"""The oci launcher with real containers (issue 23 goal 1; marker `podman`).

The attacks first, on both launchers side by side (the oci one must hold what
podman's does): a read outside the mounts, a network connection, a write to
the read-only root and to /proc/sys, a user namespace, a mount, capabilities,
the /tmp size, more processes than the pids limit.  Then the kill -9 of
brokerd in the middle of a call: the next start leaves nothing behind.
The behavioural runner tests run on both launchers in
tests/integration/test_runner_podman.py and test_filesystem_wall.py.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci import OciRuntime, default_oci_root
from boxmaker.brokerd.runner._podman import PodmanRuntime
from boxmaker.brokerd.runner._podman_argv import PodmanSettings, container_name, instance_id
from tests.conftest import REPO
from tests.fakes.podman import tools_image

pytestmark = pytest.mark.podman

PROBE = r"""
import ctypes, errno, json, os, resource, socket
out = {}
def attempt(key, fn):
    try:
        fn()
        out[key] = "done"
    except OSError as exc:
        out[key] = errno.errorcode.get(exc.errno, str(exc.errno))
libc = ctypes.CDLL(None, use_errno=True)
def check(rc):
    if rc != 0:
        raise OSError(ctypes.get_errno(), "")
attempt("read_outside", lambda: open(os.environ.get("X", "") or "SECRET").read())
attempt("read_sibling", lambda: open("SIBLING").read())
attempt("read_mounted", lambda: open("MOUNTED").read())
attempt("write_mounted", lambda: open("MOUNTED", "a").write("x"))
attempt("write_root", lambda: open("/boxmaker-probe", "w"))
attempt("write_usr", lambda: open("/usr/lib/boxmaker-probe", "w"))
attempt("write_proc_sys", lambda: open("/proc/sys/kernel/domainname", "w").write("x"))
attempt("sysrq", lambda: open("/proc/sysrq-trigger", "w").write("h"))
attempt("connect", lambda: socket.create_connection(("1.1.1.1", 80), timeout=5))
attempt("userns", lambda: check(libc.unshare(0x10000000)))
attempt("netns", lambda: check(libc.unshare(0x40000000)))
attempt("mount", lambda: check(libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None)))
attempt("chroot", lambda: os.chroot("/"))
attempt("tmp_17m", lambda: open("/tmp/big", "wb").write(b"x" * (17 << 20)))
attempt("run_17m", lambda: open("/run/big", "wb").write(b"x" * (17 << 20)))
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines()
              if ":\t" in l)
out["caps"] = sorted({status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd",
                                                  "CapAmb")})
out["no_new_privs"] = status["NoNewPrivs"].strip()
out["seccomp"] = status["Seccomp"].strip()
out["uid"] = [os.getuid(), os.getgid()]
out["pid"] = os.getpid()
out["nofile"] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
out["nproc"] = list(resource.getrlimit(resource.RLIMIT_NPROC))
out["interfaces"] = sorted(os.listdir("/sys/class/net"))
out["keys"] = open("/proc/keys").read()
out["firmware"] = os.listdir("/sys/firmware")
out["env"] = sorted(k for k in os.environ if k not in ("HOSTNAME", "HOME", "container", "LC_CTYPE"))
# LC_CTYPE: set by python itself (PEP 538 locale coercion)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def image() -> str:
    return tools_image()


def settings(image: str, launcher: str, **kw: Any) -> PodmanSettings:
    return PodmanSettings(image=image, oci_runtime="runc", timeout_ms=60_000,
                          launcher=launcher, **kw)  # type: ignore[arg-type]


async def launch(runtime: PodmanRuntime, name: str, mounts: list[Mount],
                 code: str) -> Any:
    with trio.fail_after(120):
        return await runtime._launch(name, mounts, ["python3", "-c", code], b"")


def probe(image: str, home: Path, launcher: str, tmp: Path) -> dict[str, Any]:
    secret = tmp / "secret.txt"
    secret.write_text("secret")
    granted = tmp / "granted"
    granted.mkdir(exist_ok=True)
    (granted / "mine.txt").write_text("mine")
    (granted / "sibling.txt").write_text("sibling")
    code = (PROBE.replace("SECRET", str(secret))
            .replace("SIBLING", str(granted / "sibling.txt"))
            .replace("MOUNTED", str(granted / "mine.txt")))
    mine = str(granted / "mine.txt")

    async def go() -> dict[str, Any]:
        cls = OciRuntime if launcher == "oci" else PodmanRuntime
        runtime = cls(settings(image, launcher), home, trial_run=False)
        with trio.fail_after(60):
            assert (await runtime.start()).ok
        try:
            done = await launch(runtime, container_name(instance_id(home), "probe"),
                                [Mount(source=mine, destination=mine, read_only=True)], code)
        finally:
            await runtime.aclose()
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    return trio.run(go)


@pytest.fixture(scope="module")
def probes(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    for launcher in ("podman", "oci"):
        tmp = tmp_path_factory.mktemp(launcher)
        (tmp / "home").mkdir()
        out[launcher] = probe(image, tmp / "home", launcher, tmp)
    return out


@pytest.mark.parametrize("launcher", ["podman", "oci"])
def test_the_attacks_are_refused(probes: dict[str, dict[str, Any]], launcher: str) -> None:
    got = probes[launcher]
    assert got["read_outside"] == "ENOENT"
    assert got["read_sibling"] == "ENOENT"
    assert got["read_mounted"] == "done"
    assert got["write_mounted"] == "EROFS"
    assert got["write_root"] == "EROFS"
    assert got["write_usr"] == "EROFS"
    assert got["write_proc_sys"] == "EROFS"
    assert got["sysrq"] in ("EROFS", "ENOENT")  # absent on some kernels
    assert got["connect"] == "ENETUNREACH"
    assert got["interfaces"] == ["lo"]
    assert got["userns"] == "ENOSYS"  # the one seccomp profile: no CLONE_NEW* flag
    assert got["netns"] == "ENOSYS"
    assert got["mount"] == "EPERM"
    assert got["chroot"] == "EPERM"
    assert got["tmp_17m"] == "ENOSPC"
    assert got["run_17m"] == "ENOSPC"
    assert got["caps"] == ["0000000000000000"]
    assert got["no_new_privs"] == "1"
    assert got["seccomp"] == "2"
    assert got["uid"] == [os.getuid(), os.getgid()]
    assert got["pid"] == 1  # its own pid namespace
    assert got["nofile"] == [1024, 1024] and got["nproc"] == [512, 512]
    assert got["keys"] == "" and got["firmware"] == []
    assert got["env"] == ["PATH", "PYTHONNOUSERSITE", "PYTHONSAFEPATH"]


def test_both_launchers_build_the_same_wall(probes: dict[str, dict[str, Any]]) -> None:
    assert probes["oci"] == probes["podman"]


FORK_BOMB = """
import os, time
made = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(10)
            os._exit(0)
        made += 1
except OSError as exc:
    print(made, exc.errno)
"""


def test_more_processes_than_the_pids_limit_fail(image: str, tmp_path: Path) -> None:
    async def go() -> Any:
        runtime = OciRuntime(settings(image, "oci", pids=16), tmp_path, trial_run=False)
        assert (await runtime.start()).ok
        try:
            return await launch(runtime, container_name(instance_id(tmp_path), "fork"), [],
                                FORK_BOMB)
        finally:
            await runtime.aclose()

    made, errno_ = trio.run(go).stdout.split()
    assert int(errno_) == 11 and int(made) < 16  # EAGAIN


# -- kill -9 of brokerd in the middle of a call ------------------------------------

HOLDER = """
import sys, trio
from pathlib import Path
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._oci import OciRuntime
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
home, image, fifo = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
async def main():
    settings = PodmanSettings(image=image, oci_runtime="runc", timeout_ms=600_000,
                              launcher="oci")
    runtime = OciRuntime(settings, home, trial_run=False)
    assert (await runtime.start()).ok
    code = f"open({fifo!r}, 'w').write('x'); import time; time.sleep(600)"
    await runtime._launch("boxmaker-" + runtime.instance + "-call-1",
                          [Mount(source=fifo, destination=fifo, read_only=False)],
                          ["python3", "-c", code], b"")
trio.run(main)
"""


def runc_list(root: Path) -> list[str]:
    return subprocess.run(["runc", "--root", str(root / "state"), "list", "--quiet"],
                          capture_output=True, text=True, check=True).stdout.split()


def test_nothing_survives_a_kill_9_of_brokerd(image: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    root = default_oci_root(home, instance_id(home))
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(home), image,
                               str(fifo)], cwd=REPO)
    try:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            ready, _, _ = select.select([fd], [], [], 120)
            assert ready and os.read(fd, 1) == b"x", "the call's container did not start"
        finally:
            os.close(fd)
        name = f"boxmaker-{instance_id(home)}-call-1"
        assert runc_list(root) == [name]
        assert [p.name for p in (root / "bundles").iterdir()] == [name]
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        assert runc_list(root) == [name]  # the container outlives brokerd

        async def restart() -> None:
            runtime = OciRuntime(settings(image, "oci"), home, trial_run=False)
            with trio.fail_after(120):
                assert (await runtime.start()).ok
            assert runc_list(root) == []
            assert list((root / "bundles").iterdir()) == []
            await runtime.aclose()

        trio.run(restart)
        assert not root.exists(), "the state and bundles go at stop"
        mounts = Path("/proc/self/mountinfo").read_text()
        assert str(root) not in mounts
        for controller in ("pids", "memory", "cpu"):
            assert not Path(f"/sys/fs/cgroup/{controller}/boxmaker-{instance_id(home)}"
                            ).exists(), "a cgroup was left behind"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


# -- a set-up that fails: podman under the default, unavailable when asked for ------


def _script(tmp_path: Path, name: str, text: str) -> Path:
    """An executable shell script `name` in `tmp_path` (a wrapper around a real tool)."""
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path

@pytest.mark.parametrize("launcher", [None, "oci"])
async def test_a_failed_set_up_keeps_podman_unless_oci_was_written(
    image: str, tmp_path: Path, launcher: str | None
) -> None:
    """`podman image mount` fails (a wrapper around the real podman): with `[runner]
    launcher` unset every call goes through podman, nothing of the oci launcher's is
    left mounted; with ``launcher = "oci"`` written the runner is unavailable."""
    wrapper = _script(tmp_path, "podman", '#!/bin/sh\n[ "$1 $2" = "image mount" ] && exit 125\n'
                      f'exec {shutil.which("podman")} "$@"\n')
    home = tmp_path / "home"
    home.mkdir()
    runtime = OciRuntime(settings(image, launcher, podman=str(wrapper)),  # type: ignore[arg-type]
                         home, trial_run=False)
    try:
        with trio.fail_after(120):
            check = await runtime.start()
        if check.rootless:
            pytest.skip("the oci launcher needs a rootful podman")
        assert not runtime.direct
        if launcher == "oci":
            assert not check.ok and "the oci launcher cannot be set up" in (check.reason or "")
        else:
            assert check.ok and runtime.ok and runtime.launcher == "podman"
        assert not runtime.oci_root.exists(), "nothing of the set-up is left mounted"
    finally:
        await runtime.aclose()


async def test_a_failed_trial_on_the_direct_path_keeps_podman_under_the_default(
    image: str, tmp_path: Path
) -> None:
    """The runtime fails every container brokerd runs itself (a wrapper around runc
    that refuses `run` under brokerd's own `--root`), podman's pass through: under the
    default the start-up trial finds it and every call goes through podman."""
    runc = _script(tmp_path, "runc", '#!/bin/sh\ncase "$2 $3" in */oci-*/state\\ run) '
                   f'echo refused >&2; exit 1;; esac\nexec {shutil.which("runc")} "$@"\n')
    home = tmp_path / "home"
    home.mkdir()
    runtime = OciRuntime(PodmanSettings(image=image, oci_runtime=str(runc), timeout_ms=60_000),
                         home)
    try:
        with trio.fail_after(180):
            check = await runtime.start()
        if check.rootless:
            pytest.skip("the oci launcher needs a rootful podman")
        assert check.ok, check.reason
        assert not runtime.direct and runtime.launcher == "podman"
        assert not runtime.oci_root.exists()
        with trio.fail_after(120):
            done = await launch(runtime, container_name(runtime.instance, 1), [], "print(7)")
        assert done.returncode == 0 and done.stdout == b"7\n"
    finally:
        await runtime.aclose()
