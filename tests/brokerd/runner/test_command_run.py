"""One run_command container on a real podman (marker `podman`), on both launchers.

One ``podman run --rm`` checked by its createRuntime hook (`run_command_hooked`,
what a rootful brokerd runs), podman's three steps (`run_command_container`,
a rootless one's) and, as the opt-in second run (`oci_wall`), the oci
launcher (`run_command_bundle`: runc on a bundle, the mounts checked by its
createRuntime hook).  Needs podman and the default
commands image (scripts/build-commands-image); skipped with the reason when
either is missing.  Each test checks that no container is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker._commands_config import CommandsSettings
from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._command_argv import command_container_name, command_container_prefix
from boxmaker.brokerd.runner._command_mounts import CommandPlan, plan_command_call
from boxmaker.brokerd.runner._command_oci import run_command_bundle
from boxmaker.brokerd.runner._command_run import run_command_container, run_command_hooked
from boxmaker.brokerd.runner._host_walk import HostWalker
from boxmaker.brokerd.runner._mounts import MaskSources
from boxmaker.brokerd.runner._oci import OciRuntime
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._podman_check import podman_command
from boxmaker.brokerd.runner._spec import RunOutcome
from boxmaker.brokerd.runner._three_steps import OVERFLOW_BYTES
from tests.fakes.podman import checked_image, tools_image

pytestmark = pytest.mark.podman
REPO = Path(__file__).resolve().parents[3]
INSTANCE = "c0ffee01"


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/get-podman)")
    image, _ = checked_image("build-commands-image")
    if image is None:
        pytest.skip("no default commands image (scripts/build-commands-image)")
    return image


@pytest.fixture
def proj(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "proj"
    root.mkdir()
    (tmp_path / "home").mkdir(mode=0o700)
    (tmp_path / "masks" / "dir").mkdir(parents=True)
    (tmp_path / "masks" / "file").write_text("")
    yield root
    names = subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert [n for n in names if n.startswith(command_container_prefix(INSTANCE))] == []


def _plan(proj: Path, write: bool, deny: tuple[str, ...] = ()) -> CommandPlan:
    walker = HostWalker(os.geteuid(), resolve_roots(
        [Candidate(path=str(proj.parent / "home"), required=True, own=True)]))
    masks = MaskSources(directory=str(proj.parent / "masks" / "dir"),
                        file=str(proj.parent / "masks" / "file"))
    return plan_command_call(walker, paths=[str(proj)], entry=str(proj), cwd=str(proj),
                             write=write, deny_paths=list(deny), masks=masks)


_ids = iter(range(1, 1 << 30))


@attrs.frozen
class Box:
    """One launcher: podman's three steps, or the oci launcher's runtime and image mount."""

    image: str
    oci: OciRuntime | None = None
    lower: str | None = None
    hooked: Path | None = None
    """The scratch directory of the hooked podman run (one fresh directory per call in it)."""

    async def run(self, proj: Path, argv: list[str], *, stdin: bytes | None = None,
                  write: bool = False, timeout_ms: int = 20_000, output_max_bytes: int = 65_536,
                  plan: CommandPlan | None = None, pidfile: str | None = None) -> RunOutcome:
        podman = PodmanSettings(image=self.image, podman="podman", oci_runtime="runc")
        commands = CommandsSettings(image=self.image, path=("/usr/local/bin", "/usr/bin", "/bin"),
                                    memory="256m", pids=64, cpus=1.0, tmp="16m",
                                    timeout_ms=timeout_ms, output_max_bytes=output_max_bytes)
        name = command_container_name(INSTANCE, next(_ids))
        with trio.fail_after(120):
            if self.oci is not None:
                assert self.lower is not None
                return await run_command_bundle(
                    self.oci, commands, lower=self.lower, name=name, uid=os.geteuid(),
                    gid=os.getegid(), plan=plan or _plan(proj, write), cwd=str(proj),
                    argv=argv, stdin=stdin)
            if self.hooked is not None:
                scratch = self.hooked / name
                scratch.mkdir(mode=0o700)
                return await run_command_hooked(
                    podman, commands, name=name, uid=os.geteuid(), gid=os.getegid(),
                    plan=plan or _plan(proj, write), cwd=str(proj), argv=argv, stdin=stdin,
                    scratch=scratch)
            return await run_command_container(
                podman, commands, name=name,
                uid=os.geteuid(), gid=os.getegid(), rootless=os.geteuid() != 0,
                plan=plan or _plan(proj, write), cwd=str(proj), argv=argv, stdin=stdin,
                pidfile=pidfile)


@pytest.fixture(params=["podman-hooked", "podman-three-steps",
                        pytest.param("oci", marks=pytest.mark.oci_wall)])
async def box(request: pytest.FixtureRequest, image: str,
              tmp_path: Path) -> AsyncIterator[Box]:
    if request.param == "podman-hooked":
        if os.geteuid() != 0:
            pytest.skip("the hooked run is a rootful podman's")
        (tmp_path / "hooked").mkdir(mode=0o700)
        yield Box(image, hooked=tmp_path / "hooked")
        return
    if request.param == "podman-three-steps":
        yield Box(image)
        return
    (tmp_path / "oci-home").mkdir()
    oci = OciRuntime(PodmanSettings(image=tools_image(), oci_runtime="runc", launcher="oci"),
                     tmp_path / "oci-home", trial_run=False)
    with trio.fail_after(120):
        assert (await oci.start()).ok and oci.direct
        lower = (await podman_command(["podman", "image", "mount", image])).decode().strip()
    try:
        yield Box(image, oci, lower)
        listed = await oci._runtime_command("list", "--quiet")
        assert listed.split() == [] and list(oci.bundles.iterdir()) == []
    finally:
        with trio.CancelScope(shield=True):
            await podman_command(["podman", "image", "unmount", image])
            await oci.aclose()


async def test_runs_and_answers(box: Box, proj: Path) -> None:
    got = await box.run(proj, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert got.status == "ok" and got.output is not None
    assert (got.output["exit"], got.output["stdout"], got.output["stderr"]) == (3, "out\n",
                                                                               "err\n")
    assert got.output["truncated"] is False


async def test_with_a_pid_file(box: Box, proj: Path) -> None:
    pidfile = str(proj.parent / "c.pid")
    got = await box.run(proj, ["echo", "hi"], pidfile=pidfile)
    assert got.output is not None and got.output["stdout"] == "hi\n"
    plan = _plan(proj, False)
    (dest, (dev, ino)), = plan.roots
    wrong = attrs.evolve(plan, roots=((dest, (dev, ino + 1)),))
    refused = await box.run(proj, ["echo", "hi"], plan=wrong, pidfile=pidfile)
    assert refused.status == "unsafe_target"


async def test_read_only_masked_no_network_no_environment(box: Box, proj: Path) -> None:
    (proj / "notes.txt").write_text("hello from the host\n")
    (proj / "denied").mkdir()
    (proj / "denied" / "k").write_text("secret")
    (proj / "home").symlink_to(proj.parent / "home")  # brokerd's home, linked in
    script = ("cat notes.txt; ls -A denied | wc -l; ls /sys/class/net; "
              "(echo x > new.txt) 2>&1 | head -c 200; cat home/x 2>&1 | head -c 200; "
              "env | sort")
    got = await box.run(proj, ["sh", "-c", script],
                    plan=_plan(proj, False, deny=(str(proj / "denied"),)))
    assert got.output is not None and got.output["exit"] == 0, got
    lines = str(got.output["stdout"]).splitlines()
    assert lines[0] == "hello from the host"
    assert lines[1] == "0"  # the denied subtree is masked
    assert lines[2] == "lo"  # no network but loopback
    assert "Read-only file system" in lines[3]
    assert "No such file or directory" in lines[4]  # the link leads outside the mounts
    env = [v for v in lines[5:] if not v.startswith(("HOSTNAME=", "PWD=", "SHLVL="))]
    assert env == ["HOME=/tmp", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"], env


async def test_stdin_and_write(box: Box, proj: Path) -> None:
    got = await box.run(proj, ["sh", "-c", "cat > in.txt; wc -c < in.txt"], stdin=b"abc",
                    write=True)
    assert got.output is not None and got.output["stdout"].strip() == "3"
    closed = await box.run(proj, ["cat"])  # no stdin: closed at once, cat ends
    assert closed.output is not None and closed.output["stdout"] == ""


async def test_a_missing_program_is_exit_127(box: Box, proj: Path) -> None:
    got = await box.run(proj, ["no-such-program", "x"])
    assert got.status == "ok" and got.output is not None
    assert got.output["exit"] == 127
    assert "executable file not found" in got.output["stderr"]


async def test_timeout(box: Box, proj: Path) -> None:
    got = await box.run(proj, ["sleep", "60"], timeout_ms=1500)
    assert (got.status, got.output) == ("timeout", None)


async def test_prints_forever(box: Box, proj: Path) -> None:
    got = await box.run(proj, ["yes"], output_max_bytes=4096)
    assert got.status == "ok" and got.output is not None
    assert got.output["truncated"] is True
    assert got.output["stdout_bytes"] > OVERFLOW_BYTES
    assert got.output["stdout"].startswith("y\ny\n")


async def test_a_mount_that_is_not_what_was_checked_never_runs(box: Box, proj: Path) -> None:
    plan = _plan(proj, True)
    (dest, (dev, ino)), = plan.roots
    wrong = attrs.evolve(plan, roots=((dest, (dev, ino + 1)),))
    got = await box.run(proj, ["sh", "-c", "echo ran > marker"], plan=wrong)
    assert got.status == "unsafe_target" and not (proj / "marker").exists()


async def test_the_walls(box: Box, proj: Path) -> None:
    """/tmp is sized, there is no network, nothing of the host's environment."""
    full = await box.run(proj, ["sh", "-c", "head -c 20000000 /dev/zero > /tmp/f"])
    assert full.output is not None and full.output["exit"] != 0
    assert "No space left on device" in full.output["stderr"]
    net = await box.run(proj, ["python3", "-c", (
        "import socket\n"
        "try:\n socket.create_connection(('192.0.2.1', 80), timeout=2)\n"
        "except OSError as e: print(e.errno, e.strerror)")])
    assert net.output is not None and "Network is unreachable" in net.output["stdout"]


async def test_a_fork_bomb_is_bounded_and_removed(box: Box, proj: Path) -> None:
    got = await box.run(proj, ["sh", "-c", "f() { f | f & }; f; sleep 60"], timeout_ms=2000)
    # the pids limit held it: either the final `sleep` ran and the kill removed every
    # process (timeout), or under load the limit was still full when the shell forked
    # `sleep`, and the shell ended with a failure of its own
    assert got.status == "timeout" or (
        got.status == "ok" and got.output is not None and got.output["exit"] != 0), got


def test_which_init_failures_are_the_programs() -> None:
    from boxmaker.brokerd.runner._command_run import _init_failure

    head = "`/usr/bin/podman init boxmaker-1-cmd-2` failed (exit 125): Error: runc: runc create "
    missing = _init_failure(head + 'failed: exec: "x": executable file not found in $PATH', 4096)
    assert missing is not None and missing.output is not None
    assert missing.output["exit"] == 127 and "not found" in missing.output["stderr"]
    denied = _init_failure(head + 'failed: exec: "/etc/passwd": permission denied', 4096)
    assert denied is not None and denied.output is not None and denied.output["exit"] == 126
    assert _init_failure(head + "failed: cgroup: no space left", 4096) is None
    create = "`podman create --pull=never` failed (exit 125): exec: x: permission denied"
    assert _init_failure(create, 4096) is None
