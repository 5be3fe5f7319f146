"""Grant loading: every rule G1..G9 has a fixture; every problem in every file is reported."""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.policy._grants import GrantFile, grant_digest, parse_grant_files, parse_grant_texts
from boxmaker.policy._load import load_grants
from boxmaker.policy._model import GrantSet, InvalidGrantSet
from boxmaker.proto._convert import unstructure

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "grants"
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def test_every_rule_has_a_fixture() -> None:
    rules = {f"G{n}" for n in range(1, 10)}
    covered: set[str] = set()
    for case in CASES:
        expected = json.loads((FIXTURES / case / "expected.json").read_text())
        covered |= {p["rule"] for p in expected.get("problems", [])}
        for rule in rules:
            if case.startswith(rule + "-"):
                assert rule in {p["rule"] for p in expected["problems"]}
    assert covered == rules


@pytest.mark.parametrize("case", CASES)
def test_fixture(case: str) -> None:
    expected = json.loads((FIXTURES / case / "expected.json").read_text())
    state = load_grants(FIXTURES / case)
    report = unstructure(state.report)
    assert report["ok"] is expected["ok"]
    if expected["ok"]:
        assert isinstance(state, GrantSet)
        assert report["count"] == expected["count"]
        assert [g.id for g in state.grants] == expected["grants"]
        assert report["problems"] == []
    else:
        assert isinstance(state, InvalidGrantSet)
        assert report["count"] == 0
        assert report["problems"] == expected["problems"]


def test_report_shape() -> None:
    state = parse_grant_texts({"a.toml": '[[grant]]\nid = 5\ntool = "echo"\nmode = "allow"\n'})
    doc = unstructure(state.report)
    assert list(doc) == ["ok", "count", "digest", "problems"]
    assert doc["problems"] == [
        {"file": "a.toml", "index": 0, "grant": None, "rule": "G3",
         "message": "id must be a string, not an integer"}
    ]


def test_several_problems_in_one_table_are_all_reported() -> None:
    state = load_grants(FIXTURES / "several-problems")
    rules = [(p.index, p.rule) for p in state.report.problems]
    assert rules == [(0, "G2"), (0, "G2"), (0, "G3"), (0, "G5"), (0, "G7"), (0, "G7"),
                     (0, "G9"), (2, "G3"), (2, "G7")]


def test_duplicate_id_names_both_places() -> None:
    state = parse_grant_texts({
        "a.toml": '[[grant]]\nid = "x"\ntool = "echo"\nmode = "allow"\n',
        "b.toml": '[[grant]]\nid = "y"\ntool = "echo"\nmode = "allow"\n'
                  '[[grant]]\nid = "x"\ntool = "echo"\nmode = "deny"\n',
    })
    (problem,) = state.report.problems
    assert (problem.file, problem.index, problem.grant, problem.rule) == ("b.toml", 1, "x", "G3")
    assert "a.toml grant 0" in problem.message and "b.toml grant 1" in problem.message


def test_a_valid_file_beside_an_invalid_one_gives_no_partial_set() -> None:
    state = parse_grant_texts({
        "good.toml": '[[grant]]\nid = "x"\ntool = "echo"\nmode = "allow"\n',
        "bad.toml": "[[grant]\n",
    })
    assert isinstance(state, InvalidGrantSet)
    assert state.report.count == 0
    assert not hasattr(state, "grants")


DEFAULTS = [
    ('tool = "read_file"\nmode = "allow"\npaths = ["/a"]',
     {"label": "public", "untrusted": False, "max_label": "public", "when_untrusted": "allow",
      "http": False, "private_network": False, "note": None}),
    ('tool = "http_fetch"\nmode = "ask"\nhosts = ["a.example"]',
     {"label": "public", "untrusted": True, "max_label": "public", "when_untrusted": "ask"}),
    ('tool = "write_file"\nmode = "ask"\npaths = ["/a"]\nmax_label = "secret"',
     {"label": "public", "untrusted": False, "max_label": "secret", "when_untrusted": "ask"}),
    ('tool = "echo"\nmode = "deny"\nnote = "no"', {"when_untrusted": "deny", "note": "no"}),
    ('tool = "http_fetch"\nmode = "allow"\nhosts = ["a.example"]\nuntrusted = false\n'
     'label = "secret"\nwhen_untrusted = "deny"\nhttp = true\nprivate_network = true',
     {"label": "secret", "untrusted": False, "when_untrusted": "deny", "http": True,
      "private_network": True}),
]


@pytest.mark.parametrize(("body", "fields"), DEFAULTS)
def test_defaults(body: str, fields: dict[str, Any]) -> None:
    state = parse_grant_texts({"a.toml": f'[[grant]]\nid = "g"\n{body}\n'})
    assert isinstance(state, GrantSet), state
    (grant,) = state.grants
    for name, value in fields.items():
        assert getattr(grant, name) == value


def test_host_patterns_are_parsed() -> None:
    state = parse_grant_texts({"a.toml": '[[grant]]\nid = "g"\ntool = "http_fetch"\n'
                               'mode = "ask"\nhosts = ["a.example", "*.b.example:8443"]\n'})
    assert isinstance(state, GrantSet)
    exact, wild = state.grants[0].hosts
    assert (exact.name, exact.wildcard, exact.port, exact.text) == ("a.example", False, None,
                                                                    "a.example")
    assert (wild.name, wild.wildcard, wild.port, wild.text) == ("b.example", True, 8443,
                                                                "*.b.example:8443")


def test_digest_follows_the_spec() -> None:
    files = {b"b.toml": b"# b\n", b"a.toml": b"", b"c\xc3\xa9.toml": b"x"}
    expected = hashlib.sha256()
    for name in sorted(files):
        expected.update(len(name).to_bytes(8, "big") + name)
        expected.update(len(files[name]).to_bytes(8, "big") + files[name])
    items = [GrantFile(name=n.decode(), name_bytes=n, content=c) for n, c in files.items()]
    assert grant_digest(items) == expected.hexdigest()
    state = parse_grant_files(items)
    assert state.digest == expected.hexdigest()
    assert grant_digest([]) == hashlib.sha256(b"").hexdigest()


def test_digest_differs_when_a_byte_or_a_name_changes() -> None:
    base = parse_grant_texts({"a.toml": "", "b.toml": "# x\n"}).digest
    assert parse_grant_texts({"a.toml": "", "b.toml": "# y\n"}).digest != base
    assert parse_grant_texts({"a.toml": "", "c.toml": "# x\n"}).digest != base
    # name/content boundaries are length-prefixed: moving a byte across is a change
    assert parse_grant_texts({"a.toml": "#", "b.toml": " x\n"}).digest != base


def test_unreadable_file_is_g1() -> None:
    state = parse_grant_files([GrantFile(name="a.toml", name_bytes=b"a.toml", content=b"",
                                         error="Permission denied")])
    (problem,) = state.report.problems
    assert problem.rule == "G1" and "Permission denied" in problem.message


def test_empty_directory_is_a_valid_empty_set() -> None:
    state = parse_grant_files([])
    assert isinstance(state, GrantSet)
    assert state.report.count == 0


def test_other_toml_types_are_reported() -> None:
    state = parse_grant_texts({"a.toml": (
        '[[grant]]\nid = 1979-05-27\ntool = ["echo"]\nmode = {x = 1}\n'
        '[[grant]]\nid = "d"\ntool = "read_file"\nmode = "allow"\npaths = [1.5]\n'
        'max_label = true\n'
    )})
    rules = [(p.index, p.rule) for p in state.report.problems]
    assert rules == [(0, "G3"), (0, "G4"), (0, "G5"), (1, "G5"), (1, "G7")]


# -- hostile input: never a crash, always either a set or problems -------------------------

_KEYS = st.sampled_from(
    ["id", "tool", "mode", "paths", "hosts", "label", "untrusted", "max_label",
     "when_untrusted", "note", "http", "private_network", "other"]
)
_SCALARS = st.one_of(
    st.sampled_from(["echo", "read_file", "http_fetch", "allow", "ask", "deny", "public",
                     "secret", "/a", "a.example", "*.a.example:443", "x"]),
    st.text(max_size=10),
    st.integers(),
    st.booleans(),
)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    out = []
    for ch in value:
        if ch in '"\\' or ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}" if not 0xD800 <= ord(ch) <= 0xDFFF else "?")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=8), max_size=4))
def test_arbitrary_tables_never_crash(tables: list[dict[str, Any]]) -> None:
    text = "".join(
        "[[grant]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in t.items())
        for t in tables
    )
    state = parse_grant_texts({"a.toml": text})
    if isinstance(state, InvalidGrantSet):
        assert state.report.problems
        for problem in state.report.problems:
            assert problem.rule in {f"G{n}" for n in range(1, 10)}
            assert problem.index is None or 0 <= problem.index < len(tables)
    else:
        assert len(state.grants) == len(tables)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200) | st.text(alphabet=string.printable, max_size=200))
def test_arbitrary_bytes_never_crash(content: bytes | str) -> None:
    state = parse_grant_texts({"a.toml": content})
    assert state.report.ok == (not state.report.problems)


def test_deeply_nested_values_are_g1_not_a_crash() -> None:
    for depth in (1000, 100_000):
        state = parse_grant_texts({"a.toml": "x = " + "[" * depth + "]" * depth})
        (problem,) = state.report.problems
        assert problem.rule == "G1" and "nested too deeply" in problem.message


def test_values_that_are_not_text_are_not_quoted() -> None:
    state = parse_grant_texts({"a.toml": '[[grant]]\nid = "a"\ntool = [[1]]\nmode = {a = 1}\n'})
    messages = [p.message for p in state.report.problems]
    assert messages == [
        "unknown tool (an array); tools are read_file, list_dir, write_file, http_fetch, "
        "echo, run_command, or mcp.<server id>.<local name>",
        "mode (a table) is not one of allow, ask, deny",
    ]
