"""The commands runtime's own checks (its calls through brokerd: tests/integration/
test_run_command_brokerd.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from boxmaker._commands_config import CommandsSettings
from boxmaker.brokerd.runner._command_argv import command_container_name
from boxmaker.brokerd.runner._commands_runtime import CommandsRuntime
from boxmaker.brokerd.runner._podman import PodmanRuntime
from boxmaker.brokerd.runner._podman_argv import PodmanSettings
from boxmaker.brokerd.runner._podman_check import podman_command
from boxmaker.brokerd.runner._spec import build_run_spec
from tests.fakes.podman import tools_image

MISSING = "sha256:" + "0" * 64


def settings(image: str) -> CommandsSettings:
    return CommandsSettings(image=image, path=("/usr/bin", "/bin"), memory="256m", pids=64,
                            cpus=1.0, tmp="16m", timeout_ms=10_000, output_max_bytes=65536)


def spec() -> object:
    return build_run_spec(call_id=7, session="s", tool="run_command",
                          args={"argv": ["ls"], "cwd": "/srv/proj"}, grant="g",
                          grant_entry="/srv/proj", private_network=False, label="public",
                          untrusted=True)


async def test_an_unchecked_podman_runtime_makes_every_command_unavailable(
        tmp_path: Path) -> None:
    files = PodmanRuntime(PodmanSettings(image=MISSING), tmp_path)
    commands = CommandsRuntime(files, settings(MISSING))
    assert not commands.ok and commands.reason == files.reason
    outcome = await commands.run(spec())  # type: ignore[arg-type]
    assert outcome.status == "runner_unavailable" and outcome.output is None


@pytest.mark.podman
async def test_a_missing_commands_image_is_named(tmp_path: Path) -> None:
    files = PodmanRuntime(PodmanSettings(image=tools_image(), oci_runtime="runc"), tmp_path,
                          trial_run=False)
    assert (await files.start()).ok
    commands = CommandsRuntime(files, settings(MISSING))
    await commands.start()
    assert not commands.ok
    assert commands.reason is not None and MISSING in commands.reason
    assert "scripts/build-commands-image" in commands.reason
    outcome = await commands.run(spec())  # type: ignore[arg-type]
    assert outcome.status == "runner_unavailable"
    await files.aclose()


@pytest.mark.podman
async def test_a_command_container_a_kill_9_left_is_removed_at_start(tmp_path: Path) -> None:
    """podman's launcher: a `-cmd-` container of this instance's goes at start."""
    image = tools_image()
    files = PodmanRuntime(PodmanSettings(image=image, oci_runtime="runc"), tmp_path,
                          trial_run=False)
    assert (await files.start()).ok
    name = command_container_name(files.instance, 99)
    await podman_command(["podman", "create", "--pull=never", "--name", name, image, "true"])
    try:
        commands = CommandsRuntime(files, settings(image))
        await commands.start()
        assert commands.ok
        done = await trio.run_process(["podman", "container", "exists", name], check=False)
        assert done.returncode == 1, "the leftover is still there"
    finally:
        await trio.run_process(["podman", "rm", "--force", "--ignore", name],
                               capture_stdout=True, check=False)
        await files.aclose()


IGNORES_HOOKS = """#!/bin/sh
# podman that drops `--hooks-dir D`, as a podman that ran no hook would
skip=0; first=1
for a in "$@"; do
  if [ $first = 1 ]; then set --; first=0; fi
  if [ $skip = 1 ]; then skip=0; continue; fi
  if [ "$a" = --hooks-dir ]; then skip=1; continue; fi
  set -- "$@" "$a"
done
exec podman "$@"
"""


@pytest.mark.podman
@pytest.mark.parametrize("runs_hooks", [True, False])
async def test_the_hooked_run_is_used_only_once_a_trial_ran_the_hook(
        tmp_path: Path, runs_hooks: bool) -> None:
    if os.geteuid() != 0:
        pytest.skip("the hooked run is a rootful podman's")
    podman = "podman"
    if not runs_hooks:
        podman = str(tmp_path / "podman")
        Path(podman).write_text(IGNORES_HOOKS)
        os.chmod(podman, 0o755)
    image = tools_image()
    (tmp_path / "home").mkdir()
    files = PodmanRuntime(PodmanSettings(image=image, podman=podman, oci_runtime="runc"),
                          tmp_path / "home", trial_run=False)
    try:
        with trio.fail_after(120):
            assert (await files.start()).ok
            commands = CommandsRuntime(files, settings(image))
            await commands.start()
        assert commands.ok and commands.hooked is runs_hooks
    finally:
        await files.aclose()
