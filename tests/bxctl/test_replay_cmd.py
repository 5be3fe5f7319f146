"""`bxctl grants replay`'s reading of the log (boxmaker/bxctl/_replay_cmd.py), on
real audit directories: the calls come only from a verified read, the serial
and the two-core paths give the same answers in the same order, a log that
does not verify is named and refused.  (The command's output is tested end to
end in test_grants_history_cmd.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

# bxctl's command modules import each other through _cli (a circle issue 12 breaks);
# loading _cli first, as the `bxctl` program does, gives every module its names.
import boxmaker.bxctl._cli  # noqa: F401
from boxmaker.bxctl import _replay_cmd
from boxmaker.bxctl._audit_cmd import NotFine
from boxmaker.bxctl._replay_cmd import (
    CHAIN_RUNBOOK,
    _replay_log,
    read_history,
    refuse_unverified,
    since_filter,
)
from boxmaker.policy._decision import ProtectedPaths
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.policy._replay import Change, ReplayTally
from boxmaker.proto._taint import NEW_SESSION
from boxmaker.proto.audit._history import HistoryCall
from tests.fakes.audit_log import valid_log

GRANTS = """
[[grant]]
id = "echo"
tool = "echo"
mode = "allow"
max_label = "secret"
"""


def grant_set() -> GrantSet:
    state = parse_grant_texts({"g.toml": GRANTS})
    assert isinstance(state, GrantSet)
    return state


def test_read_history_gives_each_decided_call_once(tmp_path: Path) -> None:
    builder = valid_log(7, files=2)
    builder.write(tmp_path)
    calls: list[HistoryCall] = []
    report = read_history(tmp_path, calls.append)
    assert report.ok
    assert len(calls) >= 7 and len({c.seq for c in calls}) == len(calls)
    assert [c.seq for c in calls] == sorted(c.seq for c in calls)


def _tally_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, parallel: bool,
              keep: Callable[[HistoryCall], bool] | None) -> tuple[ReplayTally, list[Change]]:
    changes: list[Change] = []
    tally = ReplayTally(on_change=changes.append)
    monkeypatch.setattr(_replay_cmd, "parallel_worth_it", lambda size: parallel)
    report = _replay_log(tmp_path, grant_set(), ProtectedPaths.of([]), keep, tally)
    assert report.ok
    return tally, changes


@pytest.mark.parametrize("keep", [None, lambda c: c.seq % 2 == 1])
def test_serial_and_pool_replay_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      keep: Callable[[HistoryCall], bool] | None) -> None:
    valid_log(9, files=3).write(tmp_path)
    serial, serial_changes = _tally_of(tmp_path, monkeypatch, parallel=False, keep=keep)
    pooled, pooled_changes = _tally_of(tmp_path, monkeypatch, parallel=True, keep=keep)
    assert serial.calls > 0
    assert (pooled.calls, pooled.changes, pooled.widening, pooled.matrix) == (
        serial.calls, serial.changes, serial.widening, serial.matrix)
    assert [(c.call.seq, c.now.outcome) for c in pooled_changes] == [
        (c.call.seq, c.now.outcome) for c in serial_changes]
    if keep is not None:
        everything, _ = _tally_of(tmp_path, monkeypatch, parallel=False, keep=None)
        assert 0 < serial.calls < everything.calls


def test_a_log_that_does_not_verify_is_named(tmp_path: Path) -> None:
    builder = valid_log(4, files=1)
    builder.write(tmp_path)
    day = next(tmp_path.glob("*.jsonl"))
    lines = day.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"seq":', b'"seq": ', 1)
    day.write_bytes(b"\n".join(lines))
    report = read_history(tmp_path, lambda c: None)
    assert not report.ok
    message = refuse_unverified(report)
    assert message.startswith("bxctl: the audit log does not verify (")
    assert f"{day.name} line " in message and message.endswith(f"See {CHAIN_RUNBOOK}")
    assert "nothing was replayed" in message


def test_an_unreadable_directory_is_not_fine(tmp_path: Path) -> None:
    with pytest.raises(NotFine, match="cannot read the audit log"):
        read_history(tmp_path / "absent", lambda c: None)


def test_since_filter() -> None:
    def at(ts: str) -> HistoryCall:
        return HistoryCall(seq=1, ts=ts, session="s", tool="echo", args_text="{}",
                           outcome="allowed", grant=None, state=NEW_SESSION)

    keep_all = since_filter(None)
    assert keep_all(at("2000-01-01T00:00:00.000000Z"))
    keep = since_filter("2026-11-02")
    assert not keep(at("2026-11-01T23:59:59.999999Z"))
    assert keep(at("2026-11-02T00:00:00.000000Z"))
