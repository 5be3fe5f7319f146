"""Reading the grants directory: real files, a missing directory, change detection."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from boxmaker._error_table import pointer_of
from boxmaker.policy._load import GrantsMissing, GrantsWatcher, fingerprint, load_grants
from boxmaker.policy._model import EMPTY_DIGEST, GrantSet, InvalidGrantSet

ECHO = '[[grant]]\nid = "{id}"\ntool = "echo"\nmode = "allow"\n'


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def test_missing_directory_is_its_own_error(tmp_path: Path) -> None:
    with pytest.raises(GrantsMissing) as info:
        load_grants(tmp_path / "nope")
    assert str(info.value).endswith("every call is denied")  # the pointer is added where shown
    assert pointer_of(info.value) == "docs/runbook.md#grants-missing"
    (tmp_path / "file").write_text("")
    with pytest.raises(GrantsMissing):
        load_grants(tmp_path / "file")


def test_only_toml_files_count(tmp_path: Path) -> None:
    _write(tmp_path / "a.toml", ECHO.format(id="a"))
    _write(tmp_path / "README", "[[[ not toml")
    _write(tmp_path / "b.toml.bak", "[[[ not toml")
    _write(tmp_path / "c.TOML", "[[[ not toml")
    state = load_grants(tmp_path)
    assert isinstance(state, GrantSet)
    assert [g.id for g in state.grants] == ["a"]
    content = ECHO.format(id="a").encode()
    expected = hashlib.sha256(
        (6).to_bytes(8, "big") + b"a.toml" + len(content).to_bytes(8, "big") + content
    ).hexdigest()
    assert state.digest == expected


def test_files_are_read_in_name_order(tmp_path: Path) -> None:
    _write(tmp_path / "b.toml", ECHO.format(id="b"))
    _write(tmp_path / "a.toml", ECHO.format(id="a"))
    _write(tmp_path / "B.toml", ECHO.format(id="upper-b"))
    state = load_grants(tmp_path)
    assert isinstance(state, GrantSet)
    assert [g.id for g in state.grants] == ["upper-b", "a", "b"]


def test_entries_that_are_not_regular_files(tmp_path: Path) -> None:
    (tmp_path / "dir.toml").mkdir()
    os.mkfifo(tmp_path / "fifo.toml")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.toml")
    _write(tmp_path / "real", ECHO.format(id="via-link"))
    os.symlink(tmp_path / "real", tmp_path / "link.toml")
    state = load_grants(tmp_path)
    assert isinstance(state, InvalidGrantSet)
    problems = {(p.file, p.rule) for p in state.report.problems}
    assert problems == {("dir.toml", "G1"), ("fifo.toml", "G1"), ("dangling.toml", "G1")}


def test_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    name = b"caf\xe9.toml"
    with open(os.path.join(os.fsencode(tmp_path), name), "w") as f:
        f.write("[[grant]\n")
    state = load_grants(tmp_path)
    (problem,) = state.report.problems
    assert problem.file == "caf\\xe9.toml"
    expected = hashlib.sha256(
        len(name).to_bytes(8, "big") + name + (9).to_bytes(8, "big") + b"[[grant]\n"
    ).hexdigest()
    assert state.digest == expected


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    _write(path, ECHO.format(id="a"))
    path.chmod(0)
    state = load_grants(tmp_path)
    (problem,) = state.report.problems
    assert problem.rule == "G1" and "cannot be read" in problem.message


def test_fingerprint_sees_names_sizes_and_times(tmp_path: Path) -> None:
    assert fingerprint(tmp_path / "missing") is None
    path = tmp_path / "a.toml"
    _write(path, ECHO.format(id="a"))
    first = fingerprint(tmp_path)
    assert first == fingerprint(tmp_path)
    _write(tmp_path / "notes.txt", "other files do not matter")
    assert fingerprint(tmp_path) == first
    info = path.stat()
    _write(path, ECHO.format(id="b"))  # same size
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    assert fingerprint(tmp_path) != first


def test_watcher_reloads_on_change_only(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    _write(path, ECHO.format(id="a"))
    watcher = GrantsWatcher(tmp_path)
    state, changed = watcher.refresh()
    assert changed and isinstance(state, GrantSet)
    again, changed = watcher.refresh()
    assert again is state and not changed

    # an edit (same size, later mtime) is seen on the next refresh
    info = path.stat()
    _write(path, ECHO.format(id="b"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    state, changed = watcher.refresh()
    assert changed and isinstance(state, GrantSet) and state.grants[0].id == "b"

    # touching without changing the content re-reads, but the set is the same
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 2_000_000))
    state2, changed = watcher.refresh()
    assert not changed and state2.digest == state.digest

    # an invalid edit: every call will be denied
    _write(tmp_path / "z.toml", "[[grant]\n")
    state, changed = watcher.refresh()
    assert changed and isinstance(state, InvalidGrantSet) and not state.missing

    # the directory goes away, then comes back
    for child in tmp_path.iterdir():
        child.unlink()
    tmp_path.rmdir()
    state, changed = watcher.refresh()
    assert changed and isinstance(state, InvalidGrantSet) and state.missing
    assert state.digest == EMPTY_DIGEST
    state, changed = watcher.refresh()
    assert not changed
    tmp_path.mkdir()
    _write(tmp_path / "a.toml", ECHO.format(id="a"))
    state, changed = watcher.refresh()
    assert changed and isinstance(state, GrantSet)


def test_watcher_starts_on_a_missing_directory(tmp_path: Path) -> None:
    watcher = GrantsWatcher(tmp_path / "grants")
    state, changed = watcher.refresh()
    assert changed and isinstance(state, InvalidGrantSet) and state.missing
    assert watcher.state is state
