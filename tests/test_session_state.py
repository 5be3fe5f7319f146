"""boxmaker/_session_state.py: the session state-file format and its reader, on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from boxmaker._session_state import (
    encode_state,
    is_session_name,
    parse_state,
    read_state,
    state_path,
)
from boxmaker.proto._taint import FAIL_CLOSED, Taint

PRIVATE = Taint(label="private", untrusted=True)


def test_session_names_are_short_lower_case_words() -> None:
    assert is_session_name("a") and is_session_name("work-2") and is_session_name("a" * 64)
    for bad in ("", "-a", "A", "a_b", "a/b", "..", "a" * 65, "a.json", "é"):
        assert not is_session_name(bad), bad


def test_the_path_of_a_state_file_and_a_bad_name_is_our_bug(tmp_path: Path) -> None:
    assert state_path(tmp_path, "work") == tmp_path / "work.json"
    with pytest.raises(ValueError, match="not a session name"):
        state_path(tmp_path, "../escape")


def test_a_written_state_reads_back(tmp_path: Path) -> None:
    data = encode_state(PRIVATE, 7)
    assert json.loads(data) == {"label": "private", "untrusted": True, "seq": 7}
    (tmp_path / "work.json").write_bytes(data)
    state = read_state(tmp_path, "work", head_seq=7)
    assert state is not None and state.problem is None
    assert (state.taint, state.seq, state.detail) == (PRIVATE, 7, None)


def test_no_file_is_none(tmp_path: Path) -> None:
    assert read_state(tmp_path, "work", head_seq=3) is None


@pytest.mark.parametrize("data", [
    b"{not json",
    b'{"label": "private", "untrusted": true}',
    b'{"label": "private", "untrusted": true, "seq": 1, "extra": 0}',
    b'{"label": "topsecret", "untrusted": true, "seq": 1}',
    b'{"label": "private", "untrusted": 1, "seq": 1}',
    b'{"label": "private", "untrusted": true, "seq": -1}',
    b"",
])
def test_a_file_that_does_not_decode_is_damaged_and_used_as_secret_untrusted(
        data: bytes) -> None:
    state = parse_state(data, head_seq=10)
    assert (state.taint, state.seq, state.problem) == (FAIL_CLOSED, 0, "damaged")
    assert state.detail


def test_a_seq_ahead_of_the_log_is_damaged() -> None:
    data = encode_state(PRIVATE, 5)
    assert parse_state(data, head_seq=5).problem is None
    ahead = parse_state(data, head_seq=4)
    assert (ahead.taint, ahead.problem) == (FAIL_CLOSED, "damaged")
    assert ahead.detail == "seq 5 is ahead of the log's head 4"
    empty_log = parse_state(data, head_seq=None)
    assert empty_log.problem == "damaged" and "head None" in (empty_log.detail or "")


def test_a_file_too_large_is_damaged(tmp_path: Path) -> None:
    data = encode_state(PRIVATE, 1)
    (tmp_path / "big.json").write_bytes(data[:-1] + b" " * 5000 + b"}")
    state = read_state(tmp_path, "big", head_seq=1)
    assert state is not None
    assert (state.taint, state.problem, state.detail) == (FAIL_CLOSED, "damaged", "file too large")


def test_a_symlinked_state_file_is_unreadable_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_bytes(encode_state(Taint(label="public", untrusted=False), 1))
    os.symlink(target, tmp_path / "work.json")
    state = read_state(tmp_path, "work", head_seq=1)
    assert state is not None
    assert (state.taint, state.problem) == (FAIL_CLOSED, "unreadable")
    assert state.detail


def test_a_directory_in_place_of_the_file_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "work.json").mkdir()
    state = read_state(tmp_path, "work", head_seq=1)
    assert state is not None
    assert (state.taint, state.problem) == (FAIL_CLOSED, "unreadable")
    assert state.detail is not None and "is a directory, not a regular file" in state.detail


def test_a_fifo_in_place_of_the_file_is_unreadable_at_once(tmp_path: Path) -> None:
    """Issue 22 item 12: opened O_NONBLOCK and checked, never waited on."""
    os.mkfifo(tmp_path / "work.json")
    state = read_state(tmp_path, "work", head_seq=1)
    assert state is not None
    assert (state.taint, state.problem) == (FAIL_CLOSED, "unreadable")
    assert state.detail is not None and "is a FIFO" in state.detail
