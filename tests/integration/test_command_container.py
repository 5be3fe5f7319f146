"""run_command's container on a real podman (marker `podman`): the argument lists of
boxmaker/brokerd/runner/_command_argv.py with the mounts of _command_mounts.py.

Needs podman and the default commands image (scripts/build-commands-image); skipped
with the reason when either is missing (the image is not yet part of ci-prepare).
The three steps as 12-tool-sources gives them: create, init (then each mount root's
identity below /proc/<pid>/root), start --attach --interactive, rm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker._commands_config import CommandsSettings
from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._command_argv import (
    build_command_create_argv,
    command_container_name,
    command_init_argv,
    command_pid_argv,
    command_rm_argv,
    command_start_argv,
)
from boxmaker.brokerd.runner._command_mounts import plan_command_call
from boxmaker.brokerd.runner._command_result import command_result
from boxmaker.brokerd.runner._host_walk import HostWalker
from boxmaker.brokerd.runner._mounts import MaskSources
from boxmaker.brokerd.runner._podman_argv import PodmanSettings

pytestmark = pytest.mark.podman
REPO = Path(__file__).resolve().parents[2]


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
def box(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "box"
    (root / "home").mkdir(parents=True, mode=0o700)  # brokerd's home: protected
    (root / "proj" / "sub").mkdir(parents=True)
    (root / "proj" / "notes.txt").write_text("hello from the host\n")
    (root / "proj" / "denied").mkdir()
    (root / "proj" / "denied" / "k").write_text("secret")
    (root / "masks" / "dir").mkdir(parents=True)
    (root / "masks" / "file").write_text("")
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(root / "home", 0o700)
    yield root


_ids = iter(range(1, 1 << 30))


def run(image: str, box: Path, argv: list[str], *, write: bool = False, cwd: str | None = None,
        stdin: bytes = b"") -> dict[str, object]:
    podman = PodmanSettings(image=image, podman="podman", oci_runtime="runc")
    commands = CommandsSettings(image=image, path=("/usr/local/bin", "/usr/bin", "/bin"),
                                memory="256m", pids=64, cpus=1.0, tmp="16m", timeout_ms=20_000,
                                output_max_bytes=65_536)
    walker = HostWalker(os.geteuid(), resolve_roots(
        [Candidate(path=str(box / "home"), required=True, own=True)]))
    proj = str(box / "proj")
    plan = plan_command_call(
        walker, paths=[str(box)], entry=str(box), cwd=cwd or proj, write=write,
        deny_paths=[str(box / "proj" / "denied")],
        masks=MaskSources(directory=str(box / "masks" / "dir"), file=str(box / "masks" / "file")),
    )
    name = command_container_name("c0ffee00", next(_ids))
    create = build_command_create_argv(podman, commands, name=name, uid=os.geteuid(),
                                       gid=os.getegid(), rootless=os.geteuid() != 0,
                                       cwd=cwd or proj, mounts=plan.mounts, argv=argv)
    try:
        subprocess.run(create, check=True, capture_output=True, timeout=60)
        subprocess.run(command_init_argv(podman, name), check=True, capture_output=True,
                       timeout=60)
        pid = subprocess.run(command_pid_argv(podman, name), check=True, capture_output=True,
                             text=True, timeout=60).stdout.strip()
        for destination, ident in plan.roots:
            st = os.stat(f"/proc/{pid}/root{destination}", follow_symlinks=False)
            assert (st.st_dev, st.st_ino) == ident
        done = subprocess.run(command_start_argv(podman, name), input=stdin, check=False,
                              capture_output=True, timeout=60)
    finally:
        subprocess.run(command_rm_argv(podman, name), capture_output=True, timeout=60,
                       check=False)
    return command_result(stdout=done.stdout[:32768], stderr=done.stderr[:32768],
                          stdout_total=len(done.stdout), stderr_total=len(done.stderr),
                          returncode=done.returncode, output_max_bytes=65_536)


def test_runs_with_the_tree_read_only_masked_and_no_network(image: str, box: Path) -> None:
    script = ("cat notes.txt; ls -A denied | wc -l; ls -A ../home | wc -l; "
              "ls /sys/class/net; (echo x > new.txt) 2>&1 | head -c 200; echo; "
              "env | sort; pwd")
    got = run(image, box, ["sh", "-c", script])
    assert got["exit"] == 0, got
    lines = str(got["stdout"]).splitlines()
    assert lines[0] == "hello from the host"
    assert lines[1:3] == ["0", "0"]  # the denied subtree and brokerd's home are masked
    assert lines[3] == "lo"
    assert "Read-only file system" in lines[4]
    env = sorted(line for line in lines[5:-1] if "=" in line)
    # podman's own HOSTNAME (the container id) and sh's PWD and SHLVL; nothing of ours.
    assert [v for v in env if not v.startswith(("HOSTNAME=", "PWD=", "SHLVL="))] == [
        "HOME=/tmp", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"], env
    assert lines[-1] == str(box / "proj")


def test_write_and_stdin(image: str, box: Path) -> None:
    got = run(image, box, ["sh", "-c", "cat > out.txt; cat out.txt"], write=True,
              stdin=b"from stdin\n")
    assert got["exit"] == 0 and got["stdout"] == "from stdin\n"
    assert (box / "proj" / "out.txt").read_text() == "from stdin\n"


def test_a_missing_program_fails_init_and_never_starts(image: str, box: Path) -> None:
    """runc 1.1 looks the program up at create (podman init), not at start: a missing
    or non-executable program is podman init's exit 125 (docs/decisions.md)."""
    for program, words in (("no-such-program", "executable file not found in $PATH"),
                           ("/etc/passwd", "permission denied")):
        with pytest.raises(subprocess.CalledProcessError) as failed:
            run(image, box, [program])
        assert failed.value.returncode == 125
        assert failed.value.cmd[3] == "init"
        assert words in failed.value.stderr.decode()


def test_exit_codes_and_binary_output(image: str, box: Path) -> None:
    assert run(image, box, ["sh", "-c", "exit 125"])["exit"] == 125
    binary = run(image, box, ["printf", "a\\377\\000b"])
    assert binary["stdout_encoding"] == "base64" and binary["stdout"] == "Yf8AYg=="
