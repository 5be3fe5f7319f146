"""Re-deciding recorded calls (boxmaker/policy/_replay.py): the cache gives what
`decide` gives, the tally counts what changed, the lines a person sees are escaped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.policy._decide import decide
from boxmaker.policy._decision import NO_PROTECTED_PATHS, Ask, Decision, ProtectedPaths, ToolCall
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.policy._replay import (
    Change,
    Redecided,
    Redecider,
    ReplayTally,
    change_json,
    change_line,
    shown_json,
    widens,
)
from boxmaker.proto._json import dumps
from boxmaker.proto._taint import Taint
from boxmaker.proto.audit._history import HistoryCall

GRANTS = """
[[grant]]
id = "read-docs"
tool = "read_file"
mode = "allow"
paths = ["/srv/docs"]
label = "private"
untrusted = false
max_label = "secret"

[[grant]]
id = "ask-notes"
tool = "read_file"
mode = "ask"
paths = ["/srv/notes"]
label = "private"
untrusted = false
max_label = "secret"

[[grant]]
id = "no-keys"
tool = "read_file"
mode = "deny"
paths = ["/srv/docs/keys"]
"""
TAINTS = [Taint(label=lab, untrusted=u)  # type: ignore[arg-type]
          for lab in ("public", "private", "secret") for u in (False, True)]


def outcome_of(result: Decision | Ask) -> str:
    """What `decide` says, in the history's words: `allowed`, `ask` or `denied:<code>`."""
    if isinstance(result, Ask):
        return "ask"
    return "allowed" if result.allowed else f"denied:{result.code}"


def grant_set() -> GrantSet:
    state = parse_grant_texts({"g.toml": GRANTS})
    assert isinstance(state, GrantSet), state
    return state


def history_call(path: str, outcome: str, *, seq: int = 1, grant: str | None = None,
                 state: Taint = TAINTS[0], session: str = "s-1") -> HistoryCall:
    return HistoryCall(seq=seq, ts="2026-12-01T10:00:00.000000Z", session=session,
                       tool="read_file", args_text=dumps({"path": path}), outcome=outcome,
                       grant=grant, state=state)


paths = st.sampled_from(["/srv/docs/a", "/srv/docs/keys/k", "/srv/notes/n", "/etc/passwd",
                         "/srv/docs", "/srv/other", "/var/lib/boxmaker/x"])


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(st.tuples(paths, st.sampled_from(TAINTS)), max_size=30),
       cache=st.integers(1, 4))
def test_the_cache_answers_what_decide_answers(calls: list[tuple[str, Taint]],
                                               cache: int) -> None:
    grants = grant_set()
    protected = ProtectedPaths.of(["/var/lib/boxmaker"])
    redecider = Redecider(grants, protected, cache_size=cache)
    for path, taint in calls:
        got = redecider(history_call(path, "allowed", state=taint))
        direct = decide(ToolCall(tool="read_file", args={"path": path}), taint, grants,
                        protected)
        assert got.outcome == outcome_of(direct)
        assert (got.grant, got.label, got.untrusted, got.matched) == (
            direct.grant, direct.label, direct.untrusted, direct.matched)
        assert len(redecider._cache) <= cache


def test_outcomes_of_each_kind() -> None:
    redecider = Redecider(grant_set(), ProtectedPaths.of(["/var/lib/boxmaker"]))
    state = TAINTS[0]
    assert redecider.decide("read_file", dumps({"path": "/srv/docs/a"}), state).outcome == \
        "allowed"
    assert redecider.decide("read_file", dumps({"path": "/srv/notes/n"}), state).outcome == "ask"
    denied = redecider.decide("read_file", dumps({"path": "/srv/docs/keys/k"}), state)
    assert denied.outcome.startswith("denied:") and denied.outcome != "denied:no_grant"
    assert redecider.decide("read_file", dumps({"path": "/etc/x"}), state).outcome == \
        "denied:no_grant"
    protected = redecider.decide("read_file", dumps({"path": "/var/lib/boxmaker/a"}), state)
    assert protected.outcome.startswith("denied:") and protected.grant is None


@pytest.mark.parametrize(("was", "now", "expected"), [
    ("denied:no_grant", "allowed", True), ("ask", "allowed", True),
    ("allowed", "allowed", False), ("allowed", "ask", False),
    ("ask", "denied:no_grant", False), ("denied:protected", "ask", False),
])
def test_widens(was: str, now: str, expected: bool) -> None:
    assert widens(was, now) is expected


def _now(outcome: str, grant: str | None = None) -> Redecided:
    return Redecided(outcome=outcome, grant=grant, label=None, untrusted=None, matched=())


@given(pairs=st.lists(st.tuples(st.sampled_from(["allowed", "ask", "denied:no_grant"]),
                                st.sampled_from(["allowed", "ask", "denied:no_grant"])),
                      max_size=40))
def test_the_tally_counts_the_matrix_changes_and_widenings(pairs: list[tuple[str, str]]) -> None:
    tally = ReplayTally()
    changes = []
    for index, (was, now) in enumerate(pairs):
        change = tally.add(history_call("/a", was, seq=index), _now(now))
        if change is not None:
            changes.append(change)
    assert tally.calls == len(pairs)
    assert tally.changes == sum(1 for was, now in pairs if was != now) == len(changes)
    assert tally.widening == sum(1 for was, now in pairs if was != "allowed" and now == "allowed")
    matrix = tally.matrix_json()
    assert sum(sum(row.values()) for row in matrix.values()) == len(pairs)
    for was, row in matrix.items():
        for now, count in row.items():
            assert count == pairs.count((was, now))
    assert list(matrix) == sorted(matrix)
    assert len(tally.matrix_lines()) == sum(len(row) for row in matrix.values())


def test_matrix_lines_are_aligned() -> None:
    tally = ReplayTally()
    tally.add(history_call("/a", "ask"), _now("allowed"))
    tally.add(history_call("/a", "denied:no_grant"), _now("denied:no_grant"))
    lines = tally.matrix_lines()
    assert lines == ["  ask             -> allowed: 1", "  denied:no_grant -> denied:no_grant: 1"]
    assert ReplayTally().matrix_lines() == []


def test_change_json_has_was_and_now() -> None:
    call = history_call("/srv/notes/n", "ask", seq=17, grant="ask-notes", session="s-9")
    doc = change_json(Change(call=call, now=_now("allowed", "read-notes")))
    assert doc == {"call": 17, "ts": call.ts, "session": "s-9", "tool": "read_file",
                   "args": {"path": "/srv/notes/n"},
                   "was": {"outcome": "ask", "grant": "ask-notes"},
                   "now": {"outcome": "allowed", "grant": "read-notes"}}


def test_change_line_marks_widening_and_escapes_model_text() -> None:
    hostile = "/srv/\x1b[2J\nfake line\u202e"
    call = history_call(hostile, "denied:no_grant", seq=3, session="s\x07")
    line = change_line(Change(call=call, now=_now("allowed", "g\x1b")))
    assert line.startswith("WIDENS: call 3 ")
    assert "\x1b" not in line and "\n" not in line and "\x07" not in line
    assert "\u202e" not in line
    assert line.endswith("-> allowed (g\\u{001B})")
    calm = change_line(Change(call=history_call("/a", "allowed"), now=_now("ask", "x")))
    assert calm.startswith("changed: ") and calm.endswith("allowed -> ask (x)")


json_values: Any = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10)


@given(value=json_values)
def test_shown_json_is_one_line_and_reads_back_when_printable(value: Any) -> None:
    shown = shown_json(value)
    assert "\n" not in shown and "\x1b" not in shown
    if all(ch.isprintable() and ch != "\\" and ord(ch) < 0x7F for ch in json.dumps(value,
                                                                                   ensure_ascii=False)):
        assert json.loads(shown) == value


def test_shown_json_shows_an_escape_as_the_spec_says() -> None:
    assert shown_json({"k": "a\x1bb\n\"\\"}) == '{"k":"a\\u{001B}b\\n\\"\\\\"}'
    assert shown_json([1, True, None]) == "[1,true,null]"


def test_no_protected_paths_is_a_valid_protected_set() -> None:
    redecider = Redecider(grant_set(), NO_PROTECTED_PATHS)
    assert redecider.decide("read_file", dumps({"path": "/srv/docs/x"}), TAINTS[0]).outcome == \
        "allowed"
