"""The fast yes for the common grant (boxmaker.policy._grant_fast, issue 23 goal 3).

The general check (`_TableCheck`) is the oracle: over generated tables near the
common shape, whenever the fast path gives a grant, the general check gives the
same grant with no problem; and the common shape is taken by the fast path (or
nothing is gained).  Whole files read either way give the same report.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.policy._grant_fast import PLAIN_PATH
from boxmaker.policy._grants import PLAIN, _TableCheck, parse_grant_texts
from boxmaker.proto._grammar import path_problem
from tests.conftest import examples

WORDS = st.sampled_from(["read_file", "list_dir", "write_file", "http_fetch", "run_command",
                         "echo", "allow", "ask", "deny", "public", "private", "secret", "x"])
PATHS = st.text(st.sampled_from([*"/a.é \x00\x7f-~\n"]), max_size=8)
VALUES = st.one_of(WORDS, PATHS, st.booleans(), st.integers(-1, 1), st.none(),
                   st.lists(st.one_of(PATHS, st.integers(0, 1)), max_size=3))
TABLES = st.dictionaries(
    st.sampled_from(["id", "tool", "mode", "paths", "label", "untrusted", "max_label",
                     "when_untrusted", "note", "hosts", "http", "private_network", "other"]),
    VALUES, max_size=9)


def _common(draw: Any) -> dict[str, Any]:
    return draw(st.fixed_dictionaries(
        {"id": st.sampled_from(["g1", "a-b", "A", "-x", "x" * 65]),
         "tool": st.sampled_from(["read_file", "list_dir", "write_file"]),
         "mode": st.sampled_from(["allow", "ask", "deny"]),
         "paths": st.lists(PATHS, max_size=2)},
        optional={"label": WORDS, "untrusted": st.booleans(), "max_label": WORDS,
                  "when_untrusted": WORDS, "note": st.one_of(PATHS, st.none())}))


def _agrees(table: dict[str, Any]) -> bool:
    fast = PLAIN.grant(table, "f.toml", 3)
    check = _TableCheck("f.toml", 3, table)
    general = check.check()
    if fast is not None:
        assert check.problems == []
        assert general == fast
    return fast is not None


@settings(max_examples=examples(1500))
@given(TABLES)
def test_a_fast_grant_is_the_general_checks_grant(table: dict[str, Any]) -> None:
    _agrees(table)


@settings(max_examples=examples(1500))
@given(st.composite(_common)())
def test_near_the_common_shape_too(table: dict[str, Any]) -> None:
    _agrees(table)


def test_the_common_shape_is_taken_quickly() -> None:
    assert _agrees({"id": "g1", "tool": "read_file", "mode": "allow", "paths": ["/srv/d1"]})
    assert _agrees({"id": "g2", "tool": "write_file", "mode": "deny", "paths": ["/a", "/b c"],
                    "note": "n"})
    assert _agrees({"id": "g3", "tool": "list_dir", "mode": "ask", "paths": ["/a/.x/..."],
                    "label": "private", "max_label": "secret", "untrusted": True,
                    "when_untrusted": "deny"})
    assert not _agrees({"id": "g4", "tool": "read_file", "mode": "allow", "paths": ["/a/.."]})
    assert not _agrees({"id": "g5", "tool": "read_file", "mode": "deny", "paths": ["/a"],
                        "label": "public"})


@settings(max_examples=examples(1000))
@given(st.text(st.sampled_from([*"/a. \x00\x7f~é\n"]), max_size=10))
def test_a_plain_path_is_of_the_path_grammar(path: str) -> None:
    if PLAIN_PATH.fullmatch(path):
        assert path_problem(path) is None
    elif path.isascii() and path.isprintable():
        assert path_problem(path) is not None


def test_a_set_with_problems_reports_as_before() -> None:
    text = ('[[grant]]\nid = "a"\ntool = "read_file"\nmode = "allow"\npaths = ["/x"]\n'
            '[[grant]]\nid = "a"\ntool = "read_file"\nmode = "allow"\npaths = ["/x/../y"]\n')
    state = parse_grant_texts({"g.toml": text})
    assert [(p.index, p.rule) for p in state.report.problems] == [(1, "G3"), (1, "G7")]
