"""Replacing a small file atomically (boxmaker/_atomic_file.py), on real files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker._atomic_file import fsync_directory, replace_file


def test_creates_the_file_with_the_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state"
    replace_file(target, b"first")
    assert target.read_bytes() == b"first"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["state"]


def test_replaces_existing_content_whole(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"a much longer old content than the new one")
    before = target.stat().st_ino
    replace_file(target, b"new", fsync=False, mode=0o640)
    assert target.read_bytes() == b"new"
    # A rename, not a rewrite in place: a reader holding the old file keeps it.
    assert target.stat().st_ino != before
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 & ~_umask()


def test_an_open_reader_keeps_the_old_bytes(tmp_path: Path) -> None:
    target = tmp_path / "state"
    replace_file(target, b"old")
    with open(target, "rb") as reader:
        replace_file(target, b"new")
        assert reader.read() == b"old"
    assert target.read_bytes() == b"new"


def test_a_symlink_planted_at_the_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    target = tmp_path / "state"
    (tmp_path / f".state.tmp-{os.getpid()}").symlink_to(victim)
    with pytest.raises(OSError):
        replace_file(target, b"evil")
    assert victim.read_bytes() == b"keep me"
    assert not target.exists()


def test_a_failed_rename_removes_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "is-a-directory"
    target.mkdir()
    (target / "inside").write_bytes(b"x")  # a non-empty directory cannot be replaced
    with pytest.raises(OSError):
        replace_file(target, b"data")
    assert sorted(os.listdir(tmp_path)) == ["is-a-directory"]


def test_fsync_directory_needs_a_directory(tmp_path: Path) -> None:
    fsync_directory(tmp_path)
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        fsync_directory(plain)


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=70_000))
def test_any_bytes_round_trip(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    target = tmp_path_factory.mktemp("atomic") / "f"
    replace_file(target, b"previous", fsync=False)
    replace_file(target, data, fsync=False)
    assert target.read_bytes() == data


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
