"""12's three podman steps, against real podman and the tools image.

create, init, the identity walk below /proc/<pid>/root, start --attach with
its output captured and bounded, and the container gone afterwards whatever
happened.  The identity check is also tried on plain host directories
(/proc/self/root), where a swapped-in link must be refused.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.runner._mounts import UnsafeTarget
from boxmaker.brokerd.runner._three_steps import (
    MountIdentity,
    check_mount_identities,
    prepared_container,
    run_captured,
)
from tests.fakes.podman import tools_image


def identity(path: Path) -> MountIdentity:
    st = os.stat(path)
    return MountIdentity(destination=str(path), dev=st.st_dev, ino=st.st_ino)


def test_the_walk_accepts_what_was_walked(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    check_mount_identities(os.getpid(), [identity(tmp_path / "a")])


def test_another_directory_is_not_what_was_checked(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    walked = identity(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "old")
    (tmp_path / "b").rename(tmp_path / "a")
    with pytest.raises(UnsafeTarget, match="not what was checked"):
        check_mount_identities(os.getpid(), [walked])


def test_a_link_swapped_in_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    walked = identity(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    swapped = MountIdentity(destination=str(tmp_path / "link"), dev=walked.dev, ino=walked.ino)
    with pytest.raises(UnsafeTarget, match="symbolic link"):
        check_mount_identities(os.getpid(), [swapped])
    with pytest.raises(UnsafeTarget, match="cannot be reached"):
        check_mount_identities(os.getpid(), [MountIdentity(
            destination=str(tmp_path / "missing"), dev=0, ino=0)])
    with pytest.raises(UnsafeTarget, match="not a normal absolute path"):
        check_mount_identities(os.getpid(), [MountIdentity(destination="/a/../b", dev=0, ino=0)])


def _create_argv(image: str, name: str, mount: Path, command: list[str]) -> list[str]:
    return ["podman", "create", "--pull=never", "--name", name, "--network=none",
            "--read-only", "--cap-drop=all", "--security-opt=no-new-privileges",
            "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=512:512",
            "--log-driver=none", "--interactive",
            "--mount", f"type=bind,source={mount},destination={mount},ro=true,"
                       "bind-nonrecursive=true,nosuid,nodev",
            "--entrypoint", command[0], image, *command[1:]]


def _exists(name: str) -> bool:
    done = subprocess.run(["podman", "container", "exists", name], check=False)
    return done.returncode == 0


@pytest.mark.podman
async def test_three_steps_run_the_program_and_leave_nothing(tmp_path: Path) -> None:
    image = tools_image()
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "hello.txt").write_text("hello from the tree\n")
    name = f"bx-test-steps-{os.getpid()}"
    script = f"cat {tmp_path}/tree/hello.txt; cat; echo err >&2; exit 3"
    argv = _create_argv(image, name, tmp_path / "tree", ["/bin/sh", "-c", script])
    with trio.fail_after(120):
        async with prepared_container("podman", argv, name, [identity(tmp_path / "tree")]):
            done = await run_captured("podman", name, stdin=b"from stdin\n", keep_each=1024,
                                      timeout_s=60)
    assert done.returncode == 3
    assert done.stdout == b"hello from the tree\nfrom stdin\n"
    assert done.stderr == b"err\n"
    assert (done.stdout_total, done.overflow, done.timed_out) == (len(done.stdout), False, False)
    assert not _exists(name)


@pytest.mark.podman
async def test_a_mount_that_is_not_what_was_walked_runs_nothing(tmp_path: Path) -> None:
    image = tools_image()
    (tmp_path / "tree").mkdir()
    (tmp_path / "other").mkdir()
    marker = tmp_path / "tree" / "ran"
    name = f"bx-test-steps-swap-{os.getpid()}"
    argv = _create_argv(image, name, tmp_path / "tree", ["/bin/sh", "-c", "echo ran"])
    other = os.stat(tmp_path / "other")
    walked = MountIdentity(destination=str(tmp_path / "tree"), dev=other.st_dev, ino=other.st_ino)
    ran = False
    with trio.fail_after(120), pytest.raises(UnsafeTarget, match="not what was checked"):
        async with prepared_container("podman", argv, name, [walked]):
            ran = True
    assert not ran and not marker.exists()
    assert not _exists(name)


@pytest.mark.podman
async def test_output_without_end_and_a_silent_program_are_bounded(tmp_path: Path) -> None:
    image = tools_image()
    (tmp_path / "tree").mkdir()
    name = f"bx-test-steps-yes-{os.getpid()}"
    argv = _create_argv(image, name, tmp_path / "tree", ["/usr/bin/yes", "y"])
    with trio.fail_after(120):
        async with prepared_container("podman", argv, name, [identity(tmp_path / "tree")]):
            done = await run_captured("podman", name, stdin=None, keep_each=100, timeout_s=60,
                                      overflow_bytes=1 << 20)
    assert done.overflow and done.stdout == b"y\n" * 50
    assert done.stdout_total > 100 + (1 << 20)
    assert not _exists(name)
    name = f"bx-test-steps-cat-{os.getpid()}"
    argv = _create_argv(image, name, tmp_path / "tree", ["/bin/sleep", "600"])
    with trio.fail_after(120):
        async with prepared_container("podman", argv, name, [identity(tmp_path / "tree")]):
            done = await run_captured("podman", name, stdin=None, keep_each=100, timeout_s=3)
    assert done.timed_out and done.returncode is None
    assert not _exists(name)
