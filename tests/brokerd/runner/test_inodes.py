"""The protected files' inode index (boxmaker/brokerd/runner/_inodes.py) on real files:
a hard link anywhere is found by its inode, also for files made after the index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner import _inodes
from boxmaker.brokerd.runner._inodes import ProtectedInodes


def index_of(home: Path, *, index: bool = True) -> ProtectedInodes:
    roots = resolve_roots([Candidate(path=str(home), required=True, own=True, index=index)])
    return ProtectedInodes(roots.roots)


def ident(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def test_files_at_any_depth_and_files_made_later_are_found(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "audit" / "deep").mkdir(parents=True)
    (home / "brokerd.toml").write_text("c")
    (home / "audit" / "deep" / "day.jsonl").write_text("d")
    inodes = index_of(home)
    assert inodes.complete
    assert inodes.lookup(*ident(home / "brokerd.toml")) == str(home / "brokerd.toml")
    assert inodes.lookup(*ident(home / "audit" / "deep" / "day.jsonl")) is not None
    (home / "state.json").write_text("s")  # made after the index: found by the refresh
    os.link(home / "state.json", tmp_path / "elsewhere")
    assert inodes.lookup(*ident(tmp_path / "elsewhere")) == str(home / "state.json")
    (tmp_path / "mine").write_text("m")
    assert inodes.lookup(*ident(tmp_path / "mine")) is None


def test_a_file_root_and_unindexed_roots(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("k")
    assert index_of(key).lookup(*ident(key)) == str(key)
    assert index_of(key, index=False).lookup(*ident(key)) is None
    assert index_of(tmp_path / "absent").lookup(*ident(key)) is None


def test_too_many_files_make_the_index_incomplete(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for n in range(5):
        (home / f"f{n}").write_text("x")
    monkeypatch.setattr(_inodes, "MAX_INDEXED", 3)
    assert not index_of(home).complete
