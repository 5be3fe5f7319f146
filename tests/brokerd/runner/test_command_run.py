"""One run_command container through the three steps, on a real podman (marker `podman`).

Needs podman and the default commands image (scripts/build-commands-image); skipped
with the reason when either is missing.  Each test checks that no container is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker._commands_config import CommandsSettings
from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._command_argv import command_container_name, command_container_prefix
from boxmaker.brokerd.runner._command_mounts import CommandPlan, plan_command_call
from boxmaker.brokerd.runner._command_result import PAST_CAP_BYTES
from boxmaker.brokerd.runner._command_run import identity_below, run_command_container
from boxmaker.brokerd.runner._host_walk import HostWalker
from boxmaker.brokerd.runner._mounts import MaskSources
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._spec import RunOutcome

pytestmark = pytest.mark.podman
REPO = Path(__file__).resolve().parents[3]
INSTANCE = "c0ffee01"


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/get-podman)")
    done = subprocess.run([str(REPO / "scripts" / "build-commands-image"), "--check"],
                          capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        pytest.skip("no default commands image (scripts/build-commands-image)")
    return done.stdout.strip()


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


def _plan(proj: Path, write: bool) -> CommandPlan:
    walker = HostWalker(os.geteuid(), resolve_roots(
        [Candidate(path=str(proj.parent / "home"), required=True, own=True)]))
    masks = MaskSources(directory=str(proj.parent / "masks" / "dir"),
                        file=str(proj.parent / "masks" / "file"))
    return plan_command_call(walker, paths=[str(proj)], entry=str(proj), cwd=str(proj),
                             write=write, deny_paths=[], masks=masks)


_ids = iter(range(1, 1 << 30))


async def run(image: str, proj: Path, argv: list[str], *, stdin: bytes | None = None,
              write: bool = False, timeout_ms: int = 20_000, output_max_bytes: int = 65_536,
              plan: CommandPlan | None = None, pidfile: str | None = None) -> RunOutcome:
    podman = PodmanSettings(image=image, podman="podman", oci_runtime="runc")
    commands = CommandsSettings(image=image, path=("/usr/local/bin", "/usr/bin", "/bin"),
                                memory="256m", pids=64, cpus=1.0, tmp="16m",
                                timeout_ms=timeout_ms, output_max_bytes=output_max_bytes)
    with trio.fail_after(120):
        return await run_command_container(
            podman, commands, name=command_container_name(INSTANCE, next(_ids)),
            uid=os.geteuid(), gid=os.getegid(), rootless=os.geteuid() != 0,
            plan=plan or _plan(proj, write), cwd=str(proj), argv=argv, stdin=stdin,
            pidfile=pidfile)


async def test_runs_and_answers(image: str, proj: Path) -> None:
    got = await run(image, proj, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert got.status == "ok" and got.output is not None
    assert (got.output["exit"], got.output["stdout"], got.output["stderr"]) == (3, "out\n",
                                                                               "err\n")
    assert got.output["truncated"] is False


async def test_with_a_pid_file(image: str, proj: Path) -> None:
    pidfile = str(proj.parent / "c.pid")
    got = await run(image, proj, ["echo", "hi"], pidfile=pidfile)
    assert got.output is not None and got.output["stdout"] == "hi\n"
    plan = _plan(proj, False)
    (dest, (dev, ino)), = plan.roots
    wrong = attrs.evolve(plan, roots=((dest, (dev, ino + 1)),))
    refused = await run(image, proj, ["echo", "hi"], plan=wrong, pidfile=pidfile)
    assert refused.status == "unsafe_target"


async def test_stdin_and_write(image: str, proj: Path) -> None:
    got = await run(image, proj, ["sh", "-c", "cat > in.txt; wc -c < in.txt"], stdin=b"abc",
                    write=True)
    assert got.output is not None and got.output["stdout"].strip() == "3"
    closed = await run(image, proj, ["cat"])  # no stdin: closed at once, cat ends
    assert closed.output is not None and closed.output["stdout"] == ""


async def test_a_missing_program_is_exit_127(image: str, proj: Path) -> None:
    got = await run(image, proj, ["no-such-program", "x"])
    assert got.status == "ok" and got.output is not None
    assert got.output["exit"] == 127
    assert "executable file not found" in got.output["stderr"]


async def test_timeout(image: str, proj: Path) -> None:
    got = await run(image, proj, ["sleep", "60"], timeout_ms=1500)
    assert (got.status, got.output) == ("timeout", None)


async def test_prints_forever(image: str, proj: Path) -> None:
    got = await run(image, proj, ["yes"], output_max_bytes=4096)
    assert got.status == "ok" and got.output is not None
    assert got.output["truncated"] is True
    assert got.output["stdout_bytes"] > PAST_CAP_BYTES
    assert got.output["stdout"].startswith("y\ny\n")


async def test_a_mount_that_is_not_what_was_checked_never_runs(image: str, proj: Path) -> None:
    plan = _plan(proj, True)
    (dest, (dev, ino)), = plan.roots
    wrong = attrs.evolve(plan, roots=((dest, (dev, ino + 1)),))
    got = await run(image, proj, ["sh", "-c", "echo ran > marker"], plan=wrong)
    assert got.status == "unsafe_target" and not (proj / "marker").exists()


def test_identity_below_refuses_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    st = os.stat(tmp_path / "real")
    rel = str(tmp_path / "real")
    assert identity_below(os.getpid(), rel) == (st.st_dev, st.st_ino)
    with pytest.raises(ValueError):
        identity_below(os.getpid(), str(tmp_path / "link"))


async def test_the_walls(image: str, proj: Path) -> None:
    """/tmp is sized, there is no network, nothing of the host's environment."""
    full = await run(image, proj, ["sh", "-c", "head -c 20000000 /dev/zero > /tmp/f"])
    assert full.output is not None and full.output["exit"] != 0
    assert "No space left on device" in full.output["stderr"]
    net = await run(image, proj, ["python3", "-c", (
        "import socket\n"
        "try:\n socket.create_connection(('192.0.2.1', 80), timeout=2)\n"
        "except OSError as e: print(e.errno, e.strerror)")])
    assert net.output is not None and "Network is unreachable" in net.output["stdout"]


async def test_a_fork_bomb_is_bounded_and_removed(image: str, proj: Path) -> None:
    got = await run(image, proj, ["sh", "-c", "f() { f | f & }; f; sleep 60"], timeout_ms=2000)
    assert got.status == "timeout"  # the pids limit held it; the kill removed every process
