"""A run_command container on the oci launcher (issue 25): runc on a bundle, marker `podman`.

The behavioural tests run on both launchers in test_command_run.py (the oci
run opt-in, `-m oci_wall`) and tests/integration/test_run_command_brokerd.py;
here, in the default run: the hook's check refuses a mount that is not what
was walked before anything runs, a missing program is exit 127, and a kill -9
of brokerd while a command runs leaves nothing after the next start.  Then
runc's log read for its own failures (pure).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker._commands_config import CommandsSettings
from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._command_argv import command_container_name
from boxmaker.brokerd.runner._command_mounts import CommandPlan, plan_command_call
from boxmaker.brokerd.runner._command_oci import _failure, run_command_bundle, runtime_error
from boxmaker.brokerd.runner._host_walk import HostWalker
from boxmaker.brokerd.runner._mounts import MaskSources
from boxmaker.brokerd.runner._oci import OciRuntime, default_oci_root
from boxmaker.brokerd.runner._podman_argv import PodmanSettings, instance_id
from boxmaker.brokerd.runner._podman_check import podman_command
from tests.brokerd.runner.test_command_run import image  # noqa: F401 - a fixture
from tests.conftest import REPO
from tests.fakes.podman import tools_image

COMMANDS = CommandsSettings(image="sha256:" + "0" * 64, path=("/usr/bin", "/bin"),
                            memory="256m", pids=64, cpus=1.0, tmp="16m", timeout_ms=60_000,
                            output_max_bytes=65_536)


def _plan(tmp: Path, proj: Path) -> CommandPlan:
    (tmp / "home").mkdir(mode=0o700, exist_ok=True)
    (tmp / "masks" / "dir").mkdir(parents=True, exist_ok=True)
    (tmp / "masks" / "file").write_text("")
    walker = HostWalker(os.geteuid(), resolve_roots(
        [Candidate(path=str(tmp / "home"), required=True, own=True)]))
    return plan_command_call(walker, paths=[str(proj)], entry=str(proj), cwd=str(proj),
                             write=True, deny_paths=[], masks=MaskSources(
                                 directory=str(tmp / "masks" / "dir"),
                                 file=str(tmp / "masks" / "file")))


@pytest.mark.podman
async def test_the_hook_refuses_what_was_not_walked_and_runs_what_was(
        image: str, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    proj = tmp_path / "proj"
    proj.mkdir()
    (tmp_path / "oci").mkdir()
    oci = OciRuntime(PodmanSettings(image=tools_image(), oci_runtime="runc", launcher="oci"),
                     tmp_path / "oci", trial_run=False)
    commands = attrs.evolve(COMMANDS, image=image)
    with trio.fail_after(180):
        assert (await oci.start()).ok and oci.direct
        lower = (await podman_command(["podman", "image", "mount", image])).decode().strip()
        try:
            plan = _plan(tmp_path, proj)
            (dest, (dev, ino)), = plan.roots
            wrong = attrs.evolve(plan, roots=((dest, (dev, ino + 1)),))
            script = ["sh", "-c", "echo ran > marker; echo ran"]
            names = (command_container_name(oci.instance, n) for n in range(1, 10))
            refused = await run_command_bundle(
                oci, commands, lower=lower, name=next(names), uid=os.geteuid(),
                gid=os.getegid(), plan=wrong, cwd=str(proj), argv=script, stdin=None)
            assert refused.status == "unsafe_target", refused
            assert "not what was checked" in (refused.message or "")
            assert not (proj / "marker").exists()
            ran = await run_command_bundle(
                oci, commands, lower=lower, name=next(names), uid=os.geteuid(),
                gid=os.getegid(), plan=plan, cwd=str(proj), argv=script, stdin=None)
            assert ran.status == "ok" and ran.output is not None, ran
            assert (ran.output["exit"], ran.output["stdout"]) == (0, "ran\n")
            assert (proj / "marker").read_text() == "ran\n"
            missing = await run_command_bundle(
                oci, commands, lower=lower, name=next(names), uid=os.geteuid(),
                gid=os.getegid(), plan=plan, cwd=str(proj), argv=["no-such-program"],
                stdin=None)
            assert missing.status == "ok" and missing.output is not None
            assert missing.output["exit"] == 127
            listed = await oci._runtime_command("list", "--quiet")
            assert listed.split() == [] and list(oci.bundles.iterdir()) == []
        finally:
            with trio.CancelScope(shield=True):
                await podman_command(["podman", "image", "unmount", image])
                await oci.aclose()


HOLDER = """
import os, sys, trio
from pathlib import Path
import attrs
from boxmaker.brokerd.runner._command_oci import run_command_bundle
from boxmaker.brokerd.runner._oci import OciRuntime
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._podman_check import podman_command
from tests.brokerd.runner.test_command_oci import COMMANDS, _plan
home, tools, image, proj = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
async def main():
    oci = OciRuntime(PodmanSettings(image=tools, oci_runtime="runc", launcher="oci"), home,
                     trial_run=False)
    assert (await oci.start()).ok
    lower = (await podman_command(["podman", "image", "mount", image])).decode().strip()
    await run_command_bundle(
        oci, attrs.evolve(COMMANDS, image=image), lower=lower,
        name=f"boxmaker-{oci.instance}-cmd-1", uid=os.geteuid(), gid=os.getegid(),
        plan=_plan(home.parent, proj), cwd=str(proj),
        argv=["sh", "-c", "echo x > started; sleep 600"], stdin=None)
trio.run(main)
"""


@pytest.mark.podman
def test_nothing_of_a_command_survives_a_kill_9_of_brokerd(
        image: str, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    home, proj = tmp_path / "home-oci", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    os.mkfifo(proj / "started")
    root = default_oci_root(home, instance_id(home))
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(home),
                               tools_image(), image, str(proj)], cwd=REPO)
    try:
        fd = os.open(proj / "started", os.O_RDONLY | os.O_NONBLOCK)
        try:
            ready, _, _ = select.select([fd], [], [], 120)
            assert ready and os.read(fd, 2) == b"x\n", "the command did not start"
        finally:
            os.close(fd)
        name = f"boxmaker-{instance_id(home)}-cmd-1"
        listed = ["runc", "--root", str(root / "state"), "list", "--quiet"]
        assert subprocess.run(listed, capture_output=True, text=True,
                              check=True).stdout.split() == [name]
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)

        async def restart() -> None:
            oci = OciRuntime(PodmanSettings(image=tools_image(), oci_runtime="runc",
                                            launcher="oci"), home, trial_run=False)
            with trio.fail_after(120):
                assert (await oci.start()).ok
            assert subprocess.run(listed, capture_output=True, text=True,
                                  check=True).stdout.split() == []
            assert list((root / "bundles").iterdir()) == []
            await oci.aclose()

        trio.run(restart)
        assert not root.exists()
        assert str(root) not in Path("/proc/self/mountinfo").read_text()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        subprocess.run(["podman", "image", "unmount", image], capture_output=True, check=False)


def test_runcs_failures_are_read_from_its_log() -> None:
    log = (b'{"level":"warning","msg":"x","time":"t"}\n'
           b'{"level":"error","msg":"runc run failed: unable to start container process: '
           b'exec: \\"nope\\": executable file not found in $PATH","time":"t"}\n')
    message = runtime_error(log)
    assert message is not None and "executable file not found" in message
    assert runtime_error(b'{"level":"info","msg":"fine"}\nnot json\n') is None
    missing = _failure(message, True, 4096)
    assert missing.status == "ok" and missing.output is not None
    assert missing.output["exit"] == 127
    # before the mounts were checked nothing is the program's
    assert _failure(message, False, 4096).status == "runner_unavailable"
    denied = _failure('exec: "/etc/passwd": permission denied', True, 4096)
    assert denied.output is not None and denied.output["exit"] == 126
    assert _failure("cgroup: no space left", True, 4096).status == "runner_unavailable"
