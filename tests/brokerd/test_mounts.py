"""The host-side O_NOFOLLOW walk from the grant path to the requested path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker.brokerd.runner._mounts import Mount, UnsafeTarget, check_host_path


def test_a_plain_path_gives_a_read_only_mount(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    mount = check_host_path(str(tmp_path), str(tmp_path / "a" / "f"), writable=False)
    assert mount == Mount(source=str(tmp_path), destination=str(tmp_path), read_only=True)
    assert mount.argument() == (
        f"type=bind,source={tmp_path},destination={tmp_path},ro=true,nosuid,nodev,noexec"
    )


def test_write_file_mounts_read_write(tmp_path: Path) -> None:
    mount = check_host_path(str(tmp_path), str(tmp_path / "new" / "deeper"), writable=True)
    assert not mount.read_only
    assert "rw=true" in mount.argument()


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_symlink_below_the_grant_is_unsafe(tmp_path: Path, depth: int) -> None:
    grant = tmp_path / "grant"
    (grant / "a" / "b").mkdir(parents=True)
    (grant / "a" / "b" / "f").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    components = [grant / "a", grant / "a" / "b", grant / "a" / "b" / "f"]
    victim = components[depth - 1]
    os.rename(victim, tmp_path / "moved")
    victim.symlink_to(outside)
    with pytest.raises(UnsafeTarget, match="symbolic link in path"):
        check_host_path(str(grant), str(grant / "a" / "b" / "f"), writable=False)


def test_the_grant_path_itself_must_not_be_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "grant").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeTarget, match="symbolic link in path"):
        check_host_path(str(tmp_path / "grant"), str(tmp_path / "grant" / "f"), writable=False)


def test_a_file_grant_is_mounted_as_itself(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    mount = check_host_path(
        str(tmp_path / "notes.txt"), str(tmp_path / "notes.txt"), writable=False
    )
    assert mount.source == str(tmp_path / "notes.txt")


def test_a_file_grant_with_a_path_below_it_is_unsafe(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UnsafeTarget):
        check_host_path(str(tmp_path / "notes.txt"), str(tmp_path / "notes.txt/x"), writable=False)


def test_a_special_file_as_grant_path_is_unsafe(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeTarget, match="neither a directory nor a regular file"):
        check_host_path(str(tmp_path / "fifo"), str(tmp_path / "fifo"), writable=False)


def test_a_missing_grant_path_is_unsafe(tmp_path: Path) -> None:
    with pytest.raises(UnsafeTarget, match="cannot be opened"):
        check_host_path(str(tmp_path / "nope"), str(tmp_path / "nope"), writable=False)


def test_a_path_outside_the_grant_is_unsafe(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    with pytest.raises(UnsafeTarget, match="not at or below"):
        check_host_path(str(tmp_path / "g"), str(tmp_path / "g2" / "f"), writable=False)


def test_a_comma_in_the_grant_path_cannot_be_mounted(tmp_path: Path) -> None:
    (tmp_path / "a,b").mkdir()
    with pytest.raises(UnsafeTarget, match="comma"):
        check_host_path(str(tmp_path / "a,b"), str(tmp_path / "a,b"), writable=False)


def test_the_walk_stops_at_a_missing_or_non_directory_component(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    check_host_path(str(tmp_path), str(tmp_path / "missing" / "x"), writable=True)
    # The toolkit reports "not a directory"; nothing here is unsafe.
    check_host_path(str(tmp_path), str(tmp_path / "f" / "x"), writable=False)


@pytest.mark.parametrize("grant", ["/usr/local", "/usr/local/lib/python3.11", "/etc", "/var/tmp"])
def test_write_grants_in_the_images_system_dirs_are_never_mounted(grant: str) -> None:
    with pytest.raises(UnsafeTarget, match="system directories"):
        check_host_path(grant, grant + "/x", writable=True)


def test_read_grants_in_system_dirs_are_mounted_read_only() -> None:
    mount = check_host_path("/etc", "/etc/hostname", writable=False)
    assert mount.read_only
