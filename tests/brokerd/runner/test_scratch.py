"""The runner's private scratch directory (boxmaker/brokerd/runner/_scratch.py)
on real directories: private, fresh at start, nothing guessable, never
another uid's removed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from boxmaker.brokerd.runner._scratch import Scratch, default_scratch_root


def test_the_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    assert default_scratch_root(tmp_path, "0123abcd") == \
        tmp_path / "xdg" / "boxmaker" / "runner-0123abcd"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert default_scratch_root(tmp_path, "0123abcd") == tmp_path / "run" / "runner-0123abcd"


def test_reset_makes_it_private_and_empties_what_was_left(tmp_path: Path) -> None:
    root = tmp_path / "run" / "runner-x"
    root.mkdir(parents=True)
    (root / "left-over").write_bytes(b"from the last run")
    scratch = Scratch(root, uid=os.geteuid())
    scratch.reset()
    assert os.listdir(root) == []
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_call_dirs_are_fresh_private_and_distinct(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path / "s", uid=os.geteuid())
    scratch.reset()
    made = {scratch.call_dir("egress-7-") for _ in range(20)}
    assert len(made) == 20
    for directory in made:
        assert directory.parent == tmp_path / "s" and directory.name.startswith("egress-7-")
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    work = scratch.work_dir()
    assert scratch.work_dir() == work  # made once


def test_mask_sources_are_empty_and_read_only(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path / "s", uid=os.geteuid())
    scratch.reset()
    directory, empty = scratch.mask_sources()
    assert empty.read_bytes() == b"" and stat.S_IMODE(empty.stat().st_mode) == 0o400
    assert os.listdir(directory) == [] and stat.S_IMODE(directory.stat().st_mode) == 0o500
    assert scratch.mask_sources() == (directory, empty)
    empty.unlink()  # removed behind brokerd's back: made again
    again = scratch.mask_sources()
    assert again[1].is_file() and again != (directory, empty)


def test_a_scratch_that_is_not_private_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    scratch = Scratch(root, uid=os.geteuid())
    scratch.reset()
    os.chmod(root, 0o755)
    with pytest.raises(OSError, match="not private to brokerd") as caught:
        scratch.call_dir("x-")
    assert "mode 0755" in str(caught.value)


def test_a_planted_symlink_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / "precious").write_bytes(b"keep")
    root = tmp_path / "s"
    root.symlink_to(elsewhere)
    scratch = Scratch(root, uid=os.geteuid())
    with pytest.raises(OSError, match="a symbolic link"):
        scratch.reset()
    assert (elsewhere / "precious").read_bytes() == b"keep"


def test_remove_leaves_another_uids_directory(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    root = tmp_path / "s"
    root.mkdir(mode=0o700)
    (root / "theirs").write_bytes(b"x")
    os.chown(root, 12345, 12345)
    scratch = Scratch(root, uid=os.geteuid())
    scratch.remove()
    assert (root / "theirs").exists()
    with pytest.raises(OSError, match="owned by uid 12345"):
        scratch.reset()


def test_remove_then_use_makes_it_again(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path / "s", uid=os.geteuid())
    scratch.reset()
    scratch.remove()
    assert not (tmp_path / "s").exists()
    assert scratch.call_dir("y-").parent == tmp_path / "s"
