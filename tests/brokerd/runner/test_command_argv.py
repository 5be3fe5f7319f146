"""run_command's podman argument lists (12-tool-sources "The container"): golden and properties."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker._commands_config import CommandsSettings
from boxmaker.brokerd.runner._command_argv import (
    build_command_create_argv,
    build_command_run_argv,
    command_container_name,
    command_container_prefix,
    command_mounts,
)
from boxmaker.brokerd.runner._mounts import Mount
from boxmaker.brokerd.runner._podman_argv import PodmanSettings, instance_id

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "runner"
SETTINGS = PodmanSettings(
    image="sha256:" + "2d7f" * 16,
    podman="/usr/bin/podman",
    oci_runtime="runc",
    seccomp="/opt/boxmaker/venv/lib/python3.11/site-packages/boxmaker/seccomp.json",
)
COMMANDS = CommandsSettings(
    image="sha256:" + "9c1e" * 16, path=("/usr/local/bin", "/usr/bin", "/bin"), memory="512m",
    pids=256, cpus=1.0, tmp="256m", timeout_ms=120_000, output_max_bytes=1_048_576,
)
MASK_DIR = "/var/lib/boxmaker/run/mask-dir"
MASK_FILE = "/var/lib/boxmaker/run/mask-file"


def test_the_golden_create() -> None:
    """Written by hand from 12's list (not generated): the grant's two entries
    read-only and executable, two masks, argv after the image as it came."""
    masks = [
        Mount(source=MASK_DIR, destination="/home/me/src/proj/.boxmaker", read_only=True),
        Mount(source=MASK_FILE, destination="/home/me/src/proj/secret.txt", read_only=True),
    ]
    mounts = command_mounts(
        [("/home/me/src/proj", "/home/me/src/proj"), ("/home/me/docs", "/data/docs")],
        write=False, masks=masks,
    )
    argv = build_command_create_argv(
        SETTINGS, COMMANDS, name=command_container_name(instance_id(Path("/var/lib/boxmaker")), 42),
        uid=1000, gid=1000, rootless=True, cwd="/home/me/src/proj/sub", mounts=mounts,
        argv=["git", "-c", "core.pager=cat", "log", "a && b; $(id) *"],
    )
    assert argv == json.loads((FIXTURES / "command-create.json").read_text())


def test_write_makes_the_entries_read_write_never_the_masks() -> None:
    mask = Mount(source=MASK_DIR, destination="/w/.boxmaker", read_only=True)
    got = command_mounts([("/w", "/w")], write=True, masks=[mask])
    assert got[0].argument() == (
        "type=bind,source=/w,destination=/w,rw=true,bind-nonrecursive=true,nosuid,nodev"
    )
    assert got[1].argument().endswith("ro=true,bind-nonrecursive=true,nosuid,nodev,noexec")
    with pytest.raises(ValueError):
        command_mounts([("/w", "/w")], write=True,
                       masks=[Mount(source=MASK_DIR, destination="/w/x", read_only=False)])


def test_a_pid_file_follows_the_name() -> None:
    got = build_command_create_argv(SETTINGS, COMMANDS, name="n", uid=1, gid=1, rootless=False,
                                    cwd="/w", mounts=[], argv=["true"], pidfile="/run/b/n.pid")
    at = got.index("--name")
    assert got[at : at + 4] == ["--name", "n", "--pidfile", "/run/b/n.pid"]


def test_names() -> None:
    name = command_container_name("7515ea5e", 42)
    assert name.startswith(command_container_prefix("7515ea5e"))
    assert name == "boxmaker-7515ea5e-cmd-42"


_TOKENS = st.text(min_size=0, max_size=12).filter(lambda t: "\0" not in t)


@settings(max_examples=100, deadline=None)
@given(argv=st.lists(_TOKENS, min_size=0, max_size=6), rootless=st.booleans(),
       runtime=st.sampled_from([None, "crun"]))
def test_argv_comes_last_and_whole(argv: list[str], rootless: bool, runtime: str | None) -> None:
    podman = PodmanSettings(image=SETTINGS.image, oci_runtime=runtime, seccomp=SETTINGS.seccomp)
    full = ["git", *argv]
    got = build_command_create_argv(
        podman, COMMANDS, name="n", uid=1, gid=2, rootless=rootless, cwd="/w", mounts=[],
        argv=full,
    )
    at = got.index(COMMANDS.image)
    assert got[at + 1 :] == full
    options = got[:at]
    for flag in ("--network=none", "--read-only", "--cap-drop=all",
                 "--security-opt=no-new-privileges", "--unsetenv-all", "--log-driver=none",
                 "--interactive", "--pull=never"):
        assert flag in options
    assert ("--userns=keep-id" in options) is rootless
    assert ("--runtime" in options) is (runtime is not None)
    for never in ("--privileged", "--env-host", "--network=host", "--device", "--rm"):
        assert never not in options


def test_an_empty_argv_is_our_bug() -> None:
    with pytest.raises(ValueError):
        build_command_create_argv(SETTINGS, COMMANDS, name="n", uid=1, gid=1, rootless=False,
                                  cwd="/w", mounts=[], argv=[])


def test_the_golden_run() -> None:
    """The hooked form: the create flags after ``--hooks-dir D run --rm`` and the call's
    annotation (generated once from the create list's flags, then read against it)."""
    mounts = command_mounts([("/home/me/src/proj", "/home/me/src/proj")], write=True)
    name = command_container_name(instance_id(Path("/var/lib/boxmaker")), 42)
    kwargs = dict(name=name, uid=0, gid=0, rootless=False, cwd="/home/me/src/proj",
                  mounts=mounts, argv=["git", "status"])
    run = build_command_run_argv(SETTINGS, COMMANDS, hooks_dir="/run/bx/cmd-x/hooks.d",
                                 **kwargs)  # type: ignore[arg-type]
    golden = FIXTURES / "command-run.json"
    if os.environ.get("BOXMAKER_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(run, indent=1) + "\n")
    assert run == json.loads(golden.read_text())
    create = build_command_create_argv(SETTINGS, COMMANDS, **kwargs)  # type: ignore[arg-type]
    at = create.index("create")
    assert run[:at] == create[:at]
    assert run[at:at + 9] == ["--hooks-dir", "/run/bx/cmd-x/hooks.d", "run", "--rm",
                              "--pull=never", "--name", name, "--annotation",
                              f"org.boxmaker.call={name}"]
    assert run[at + 9:] == create[at + 4:]  # create --pull=never --name NAME
    # Removed after the answer: the same list without --rm (nothing else differs).
    later = build_command_run_argv(SETTINGS, COMMANDS, hooks_dir="/run/bx/cmd-x/hooks.d",
                                   remove=False, **kwargs)  # type: ignore[arg-type]
    assert "--rm" not in later and later == run[:at + 3] + run[at + 4:]
