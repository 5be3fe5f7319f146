"""The podman runtime's pure parts: settings, argument lists (golden), requests, answers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from boxmaker.brokerd.runner._egress import split_url
from boxmaker.brokerd.runner._mounts import Mount, UnsafeTarget
from boxmaker.brokerd.runner._podman_argv import (
    EGRESS_MOUNT,
    PodmanSettings,
    build_argv,
    build_request,
    container_name,
    instance_id,
    parse_answer,
    toolkit_command,
)
from tests.conftest import FIXTURES

IMAGE = "sha256:" + "2d7f" * 16
SETTINGS = PodmanSettings(
    image=IMAGE,
    podman="/usr/bin/podman",
    oci_runtime="runc",
    memory="256m",
    pids=64,
    cpus=1.0,
    timeout_ms=30000,
    output_max_bytes=2097152,
    nofile=1024,
    nproc=512,
    seccomp="/opt/boxmaker/venv/lib/python3.11/site-packages/boxmaker/seccomp.json",
)
HOME = Path("/var/lib/boxmaker")
GRANT = "/home/me/notes"

FILE = f"{GRANT}/todo.txt"
HOME_MASK = Mount(
    source="/run/user/1000/boxmaker/runner-7515ea5e/empty-1a2b3c4d/dir",
    destination=f"{GRANT}/.boxmaker",
    read_only=True,
)
KEY_MASK = Mount(
    source="/run/user/1000/boxmaker/runner-7515ea5e/empty-1a2b3c4d/empty",
    destination=f"{GRANT}/key.pem",
    read_only=True,
)

# The narrowest mounts (issue 10): the one file, the one directory (with what
# no tool may see inside it masked), the file itself or its parent to write.
GOLDEN_CASES: dict[str, tuple[str, list[Mount], bool]] = {
    "read_file": ("read_file", [Mount(source=FILE, destination=FILE, read_only=True)], False),
    "list_dir": (
        "list_dir",
        [Mount(source=GRANT, destination=GRANT, read_only=True), HOME_MASK, KEY_MASK],
        False,
    ),
    "write_file": (
        "write_file",
        [Mount(source=GRANT, destination=GRANT, read_only=False), HOME_MASK, KEY_MASK],
        False,
    ),
    "write_file-replace": (
        "write_file",
        [Mount(source="/var/home/me/notes/todo.txt", destination=FILE, read_only=False)],
        False,
    ),
    "http_fetch": (
        "http_fetch",
        [
            Mount(
                source="/run/user/1000/boxmaker/runner-7515ea5e/egress-k2j9x_1q",
                destination=EGRESS_MOUNT,
                read_only=True,
            )
        ],
        False,
    ),
    "read_file-rootless": (
        "read_file",
        [Mount(source=FILE, destination=FILE, read_only=True)],
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_argument_lists_match_the_golden_files(case: str) -> None:
    tool, mounts, rootless = GOLDEN_CASES[case]
    argv = build_argv(
        SETTINGS,
        name=container_name(instance_id(HOME), 42),
        uid=1000,
        gid=1000,
        rootless=rootless,
        mounts=mounts,
        command=toolkit_command(tool),
    )
    golden = FIXTURES / "runner" / f"{case}.json"
    if os.environ.get("BOXMAKER_UPDATE_GOLDEN") == "1":
        golden.write_text(json.dumps(argv, indent=1) + "\n")
    assert argv == json.loads(golden.read_text())


def test_every_flag_of_08_runner_is_there() -> None:
    argv = json.loads((FIXTURES / "runner" / "read_file.json").read_text())
    joined = " ".join(argv)
    for flag in [
        "--runtime runc run --rm --pull=never --name boxmaker-",
        "--network=none",
        "--read-only",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        "--user 1000:1000",
        "--memory 256m",
        "--pids-limit 64",
        "--cpus 1.0",
        "--ulimit nofile=1024:1024",
        "--ulimit nproc=512:512",
        "--tmpfs /tmp:size=16m",
        "--unsetenv-all",
        "--interactive",
        f"{IMAGE} python3 -m boxmaker.toolkit read_file",
    ]:
        assert flag in joined
    assert "--env-host" not in argv
    assert "--userns=keep-id" not in argv
    rootless = json.loads((FIXTURES / "runner" / "read_file-rootless.json").read_text())
    assert "--userns=keep-id" in rootless


def test_instance_is_the_first_8_hex_of_sha256_of_home() -> None:
    import hashlib

    assert instance_id(HOME) == hashlib.sha256(b"/var/lib/boxmaker").hexdigest()[:8]
    assert container_name("0123abcd", 7) == "boxmaker-0123abcd-call-7"


@pytest.mark.parametrize(
    "image",
    ["boxmaker-tools:latest", "sha256:abc", "docker.io/x@sha256:" + "a" * 64, "SHA256:" + "a" * 64],
)
def test_the_image_must_be_a_digest(image: str) -> None:
    with pytest.raises(ValueError, match="by digest"):
        PodmanSettings(image=image)


@pytest.mark.parametrize(
    "change",
    [
        {"memory": "lots"},
        {"pids": 0},
        {"cpus": 0.0},
        {"cpus": float("nan")},
        {"timeout_ms": 0},
        {"output_max_bytes": 100},
        {"nofile": 0},
        {"nproc": True},
    ],
)
def test_bad_limits_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        attrs.evolve(SETTINGS, **change)


def test_the_request_carries_args_limits_and_egress() -> None:
    assert json.loads(build_request({"path": "/a"}, 4096, None)) == {
        "args": {"path": "/a"},
        "limits": {"output_max_bytes": 4096},
    }
    assert json.loads(build_request({"url": "https://a.b/"}, 4096, "/run/x/socks"))["egress"] == {
        "socket": "/run/x/socks"
    }


def test_the_request_carries_what_the_host_walk_checked() -> None:
    checked = {"root": {"path": "/a", "dev": 2049, "ino": 7}, "target": None, "created": False}
    assert json.loads(build_request({"path": "/a"}, 4096, None, checked))["checked"] == checked


def test_a_mount_mismatch_is_an_unsafe_target_not_a_tool_failure() -> None:
    outcome = parse_answer(
        b'{"error":{"code":"mount_mismatch","message":"the target is not the object"}}'
    )
    assert outcome is not None and outcome.status == "unsafe_target"
    assert outcome.output is None
    assert outcome.message is not None and outcome.message.startswith("mount_mismatch")


def test_answers_are_parsed_strictly() -> None:
    ok = parse_answer(b'{"ok":{"bytes_written":3}}')
    assert ok is not None and ok.status == "ok" and ok.output == {"bytes_written": 3}
    failed = parse_answer(b'{"error":{"code":"symlink","message":"symbolic link in path"}}')
    assert failed is not None and failed.status == "tool_failed"
    assert failed.output == {"error": {"code": "symlink", "message": "symbolic link in path"}}
    for bad in [
        b"",
        b"{",
        b'{"ok":1}',
        b'{"ok":{},"x":1}',
        b'{"error":{"code":1,"message":""}}',
        b'{"ok":{"a":1,"a":2}}',
        b'{"ok":{}} trailing',
    ]:
        assert parse_answer(bad) is None, bad


def test_urls_are_split_for_the_seal() -> None:
    assert split_url("https://docs.python.org/3/") == ("https", "docs.python.org", 443)
    assert split_url("http://a.example:8080?x") == ("http", "a.example", 8080)
    assert split_url("https://a.example:443") == ("https", "a.example", 443)
    with pytest.raises(UnsafeTarget):
        split_url("ftp://a.example/")


def test_podman_never_runs_in_brokerds_own_directory(tmp_path: Path) -> None:
    """conmon writes an `oom` file into podman's working directory: keep it private."""
    from boxmaker.brokerd.runner._podman import PodmanRuntime

    (tmp_path / "home").mkdir()
    runtime = PodmanRuntime(SETTINGS, tmp_path / "home",
                            scratch_root=tmp_path / "scratch", trial_run=False)
    runtime.scratch.reset()
    work = runtime.scratch.work_dir()
    assert work.parent == tmp_path / "scratch" and work != Path.cwd()
    assert work.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "scratch").stat().st_mode & 0o777 == 0o700
