"""Session state files: atomic writes, damage detection, rebuild from the log (04-audit)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker.brokerd._state import (
    TaintChange,
    encode_state,
    list_sessions,
    read_state,
    rebuild,
    sync_state_files,
    write_state,
)
from boxmaker.proto._taint import FAIL_CLOSED, Taint

PRIVATE = Taint(label="private", untrusted=False)
SECRET_U = Taint(label="secret", untrusted=True)


def test_write_then_read(tmp_path: Path) -> None:
    write_state(tmp_path, "s1", PRIVATE, 12)
    assert (tmp_path / "s1.json").read_bytes() == b'{"label":"private","untrusted":false,"seq":12}'
    state = read_state(tmp_path, "s1", head_seq=12)
    assert state is not None and state.problem is None
    assert state.taint == PRIVATE and state.seq == 12
    assert read_state(tmp_path, "other", head_seq=12) is None
    assert list_sessions(tmp_path) == ["s1"]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize("content", [
    b"",
    b"not json",
    b'{"label":"private","untrusted":false}',
    b'{"label":"private","untrusted":false,"seq":1,"x":1}',
    b'{"label":"top","untrusted":false,"seq":1}',
    b'{"label":"public","untrusted":0,"seq":1}',
    b'{"label":"public","untrusted":false,"seq":-1}',
    b'{"label":"public","untrusted":false,"seq":99}',
    b'{"label":"public","untrusted":false,"seq":1,"seq":1}',
    b"x" * 5000,
])
def test_damaged_is_fail_closed(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "s1.json").write_bytes(content)
    state = read_state(tmp_path, "s1", head_seq=10)
    assert state is not None and state.problem == "damaged"
    assert state.taint == FAIL_CLOSED


def test_ahead_of_an_empty_log_is_damaged(tmp_path: Path) -> None:
    (tmp_path / "s1.json").write_bytes(encode_state(PRIVATE, 0))
    state = read_state(tmp_path, "s1", head_seq=None)
    assert state is not None and state.problem == "damaged"


def test_unreadable_is_fail_closed(tmp_path: Path) -> None:
    (tmp_path / "s1.json").mkdir()
    state = read_state(tmp_path, "s1", head_seq=10)
    assert state is not None and state.problem in ("unreadable", "damaged")
    assert state.taint == FAIL_CLOSED
    target = tmp_path / "real.json"
    target.write_bytes(encode_state(PRIVATE, 1))
    (tmp_path / "s2.json").symlink_to(target)
    state = read_state(tmp_path, "s2", head_seq=10)
    assert state is not None and state.problem == "unreadable"


def test_rebuild_last_change_wins() -> None:
    changes = [
        TaintChange(seq=3, session="a", taint=PRIVATE),
        TaintChange(seq=5, session="b", taint=SECRET_U),
        TaintChange(seq=9, session="a", taint=Taint(label="public", untrusted=False)),
    ]
    assert rebuild(changes) == {"a": (Taint(label="public", untrusted=False), 9),
                                "b": (SECRET_U, 5)}


def test_sync_rewrites_missing_stale_and_damaged(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    write_state(sessions, "same", PRIVATE, 3)
    write_state(sessions, "stale", Taint(label="public", untrusted=False), 2)
    (sessions / "broken.json").write_bytes(b"{")
    (sessions / "unknown.json").write_bytes(b"{")
    rebuilt = {"same": (PRIVATE, 3), "stale": (SECRET_U, 7), "broken": (PRIVATE, 4),
               "missing": (PRIVATE, 5)}
    report = sync_state_files(sessions, rebuilt, head_seq=10)
    assert sorted(report.rewritten) == ["broken", "missing", "stale"]
    assert report.stale == ["unknown"] and report.failed == []
    for name, (taint, seq) in rebuilt.items():
        state = read_state(sessions, name, head_seq=10)
        assert state is not None and (state.taint, state.seq) == (taint, seq)


def test_write_failure_is_reported(tmp_path: Path) -> None:
    from boxmaker.brokerd._state import StateWriteError

    with pytest.raises(StateWriteError):
        write_state(tmp_path / "missing-dir", "s1", PRIVATE, 1)
    with pytest.raises(ValueError):
        write_state(tmp_path, "../escape", PRIVATE, 1)


def test_rebuild_keeps_the_seq_of_the_last_change() -> None:
    public = Taint(label="public", untrusted=False)
    changes = [
        TaintChange(seq=2, session="a", taint=public),  # a new session is public already
        TaintChange(seq=4, session="a", taint=PRIVATE),
        TaintChange(seq=6, session="a", taint=PRIVATE),  # ran, changed nothing
        TaintChange(seq=8, session="b", taint=public, declassify=True),
    ]
    assert rebuild(changes) == {"a": (PRIVATE, 4), "b": (public, 8)}
