"""run_command through the real brokerd, real podman and the commands image (issue 25).

Each case is an attack or a promise of 12's "run_command" checked from
broker.sock: the allowed program runs in the granted tree with no network,
brokerd's home inside the grant is masked, a symbolic link as cwd is refused,
a program given as a path is not the bare name the grant allows, shell words
are plain bytes, a missing program exits 127.  One brokerd per launcher serves
the first three tests (module fixtures); the oci launcher's run is opt-in
(`-m oci_wall`, docs/decisions.md); test_run_command_attacks.py holds the rest
of the attacks.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.brokerd import BrokerdProcess, Home, call_request, request, start
from tests.fakes.podman import commands_image, tools_image

pytestmark = pytest.mark.podman
REPO = Path(__file__).resolve().parents[2]


def grants(proj: Path) -> str:
    return f"""
[[grant]]
id = "proj-ls"
tool = "run_command"
mode = "allow"
paths = ["{proj}"]
commands = [["ls"], ["cat"], ["echo"], ["git", "ls-remote"], ["no-such-program"]]
rest = "any"
"""


@pytest.fixture(scope="module")
def proj() -> Iterator[Path]:
    root = Path(subprocess.check_output(["mktemp", "-d", "/tmp/bx-cmd-XXXXXX"],
                                        text=True).strip())
    (root / "proj").mkdir()
    (root / "proj" / "hello.txt").write_text("hello from the tree\n")
    (root / "outside.txt").write_text("not for the model")
    yield root / "proj"
    shutil.rmtree(root)


LAUNCHERS = ["podman", pytest.param("oci", marks=pytest.mark.oci_wall)]


def configure(home: Home, launcher: str) -> None:
    """The podman runner on `launcher`, the tools image, and `[commands]`."""
    image = tools_image()
    commands = commands_image()
    text = home.config.read_text().replace(
        'kind = "podman"\n',
        f'kind = "podman"\npodman = "podman"\nimage = "{image}"\noci_runtime = "runc"\n')
    text = text.replace('launcher = "podman"\n', f'launcher = "{launcher}"\n')
    text += f'\n[commands]\nimage = "{commands}"\ntimeout_ms = 60000\n'
    home.config.write_text(text)


@pytest.fixture(scope="module", params=LAUNCHERS)
def brokerd(request: pytest.FixtureRequest, proj: Path) -> Iterator[tuple[Home, BrokerdProcess]]:
    home = Home(runner="podman", grants={"proj.toml": grants(proj)}, fsync=False)
    configure(home, request.param)
    proc = start(home, timeout=120)
    try:
        yield home, proc
    finally:
        proc.stop()


def run(home: Home, argv: list[str], cwd: Path | str, number: int = 1) -> dict[str, Any]:
    frames = request(home.broker, call_request(
        "s1", "run_command", {"argv": argv, "cwd": str(cwd)}, number), 120)
    assert len(frames) == 1, frames
    frame: dict[str, Any] = frames[0]
    return frame


def test_an_allowed_command_runs_in_the_granted_tree(
        brokerd: tuple[Home, BrokerdProcess], proj: Path) -> None:
    home, _ = brokerd
    frame = run(home, ["cat", "hello.txt"], proj)
    result = frame["result"]
    assert result["status"] == "ok", frame
    assert result["output"]["exit"] == 0
    assert result["output"]["stdout"] == "hello from the tree\n"
    # shell words are bytes of an argument: no shell ever sees them
    frame = run(home, ["echo", "a && cat /etc/shadow; $(id) | `x` *"], proj, 2)
    assert frame["result"]["output"]["stdout"] == "a && cat /etc/shadow; $(id) | `x` *\n"
    # outside the grant nothing is mounted
    frame = run(home, ["cat", str(proj.parent / "outside.txt")], proj, 3)
    out = frame["result"]["output"]
    assert out["exit"] != 0 and "No such file" in out["stderr"], frame


def test_no_network_and_a_missing_program(
        brokerd: tuple[Home, BrokerdProcess], proj: Path) -> None:
    home, _ = brokerd
    frame = run(home, ["ls", "/sys/class/net"], proj)
    assert frame["result"]["output"]["stdout"] == "lo\n", frame  # no interface but loopback
    frame = run(home, ["git", "ls-remote", "http://1.1.1.1/x.git"], proj, 3)
    out = frame["result"]["output"]
    assert out["exit"] == 128 and "connect" in out["stderr"].lower(), frame
    frame = run(home, ["no-such-program"], proj, 2)
    assert frame["result"]["status"] == "ok", frame
    assert frame["result"]["output"]["exit"] == 127
    # the oci launcher ran it with `runc run` itself, podman's through `runc create`
    oci = 'launcher = "oci"' in home.config.read_text()
    assert ("runc run failed" in frame["result"]["output"]["stderr"]) is oci, frame


def test_a_path_is_not_the_bare_name_and_a_link_is_not_a_cwd(
        brokerd: tuple[Home, BrokerdProcess], proj: Path) -> None:
    home, _ = brokerd
    frame = run(home, ["/bin/ls"], proj)
    assert frame["denied"]["code"] == "no_grant", frame
    (proj / "up").symlink_to(proj.parent)
    frame = run(home, ["ls"], proj / "up", 2)
    assert frame["denied"]["code"] == "unsafe_target", frame
    frame = run(home, ["ls"], proj.parent, 3)
    assert frame["denied"]["code"] == "no_grant", frame


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_brokerds_home_inside_the_grant_is_masked(proj: Path, launcher: str) -> None:
    home = Home(runner="podman", grants={}, fsync=False)
    grant_root = home.root
    (home.grants / "all.toml").write_text(grants(grant_root))
    configure(home, launcher)
    proc = start(home, timeout=120)
    try:
        frame = run(home, ["ls", "-A", str(home.home)], grant_root)
        assert frame["result"]["status"] == "ok", frame
        assert frame["result"]["output"]["stdout"] == "", frame  # an empty mask
    finally:
        proc.stop()
