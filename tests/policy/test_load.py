"""Reading the grants directory: real files, a missing directory, change detection."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from boxmaker._error_table import pointer_of
from boxmaker.policy import _load
from boxmaker.policy._load import (
    SETTLED_NS,
    DirectoryListing,
    GrantsMissing,
    GrantsWatcher,
    fingerprint,
    load_grants,
)
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


def _counted_listings(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    listed: list[Path] = []
    real = _load._entry_names

    def counting(directory: Path) -> list[bytes]:
        listed.append(directory)
        return real(directory)

    monkeypatch.setattr(_load, "_entry_names", counting)
    return listed


def test_a_settled_directory_is_listed_again_only_when_its_stat_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _counted_listings(monkeypatch)
    _write(tmp_path / "a.toml", ECHO.format(id="a"))
    later = tmp_path.stat().st_ctime_ns + SETTLED_NS + 1
    listing = DirectoryListing(now_ns=lambda: later)
    first = fingerprint(tmp_path, listing)
    assert first is not None and [entry[0] for entry in first] == [b"a.toml"]
    assert fingerprint(tmp_path, listing) == first
    assert len(listed) == 1  # the second check only looked at the directory's stat

    _write(tmp_path / "b.toml", ECHO.format(id="b"))  # a new entry: the directory changed
    later = tmp_path.stat().st_ctime_ns + SETTLED_NS + 1
    names = [entry[0] for entry in fingerprint(tmp_path, listing) or ()]
    assert names == [b"a.toml", b"b.toml"] and len(listed) == 2

    (tmp_path / "a.toml").rename(tmp_path / "c.toml")
    later = tmp_path.stat().st_ctime_ns + SETTLED_NS + 1
    names = [entry[0] for entry in fingerprint(tmp_path, listing) or ()]
    assert names == [b"b.toml", b"c.toml"]

    # an edit inside a file leaves the directory's stat alone: the file's own stat tells
    before = fingerprint(tmp_path, listing)
    info = (tmp_path / "b.toml").stat()
    _write(tmp_path / "b.toml", ECHO.format(id="x"))
    os.utime(tmp_path / "b.toml", ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    assert fingerprint(tmp_path, listing) != before


def test_a_young_directory_is_listed_on_every_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two changes within one tick of the coarse clock leave the same stat: a
    directory that changed less than SETTLED_NS ago is never trusted by its stat."""
    listed = _counted_listings(monkeypatch)
    _write(tmp_path / "a.toml", ECHO.format(id="a"))
    young = tmp_path.stat().st_ctime_ns + SETTLED_NS - 1
    listing = DirectoryListing(now_ns=lambda: young)
    for _ in range(3):
        fingerprint(tmp_path, listing)
    assert len(listed) == 3


def test_a_listing_of_a_missing_directory_is_none_and_sees_it_come(tmp_path: Path) -> None:
    listing = DirectoryListing()
    assert fingerprint(tmp_path / "grants", listing) is None
    (tmp_path / "grants").mkdir()
    _write(tmp_path / "grants" / "a.toml", ECHO.format(id="a"))
    found = fingerprint(tmp_path / "grants", listing)
    assert found is not None and found[0][0] == b"a.toml"
    (tmp_path / "grants" / "a.toml").unlink()
    (tmp_path / "grants").rmdir()
    assert fingerprint(tmp_path / "grants", listing) is None
    with pytest.raises(GrantsMissing):
        listing.names(tmp_path / "grants")


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
