"""Grant values: host pattern matching and specificity, the indexed set, the report shape."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.policy._decide import decide
from boxmaker.policy._decision import ProtectedPaths, ToolCall
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import (
    EMPTY_DIGEST,
    Grant,
    GrantSet,
    GrantsReport,
    HostPattern,
    path_grants,
)
from boxmaker.proto._convert import structure, unstructure
from boxmaker.proto._taint import Taint


def test_host_pattern_matching() -> None:
    exact = HostPattern(text="a.example", name="a.example", wildcard=False, port=None)
    wild = HostPattern(text="*.a.example", name="a.example", wildcard=True, port=None)
    assert exact.matches_host("a.example") and not exact.matches_host("b.a.example")
    assert wild.matches_host("b.a.example") and wild.matches_host("c.b.a.example")
    assert not wild.matches_host("a.example") and not wild.matches_host("ba.example")


def test_specificity_order() -> None:
    def p(text: str) -> HostPattern:
        wildcard = text.startswith("*.")
        name, _, port = text.removeprefix("*.").partition(":")
        return HostPattern(text=text, name=name, wildcard=wildcard,
                           port=int(port) if port else None)

    ordered = ["*.a.example", "*.a.example:443", "*.long.a.example", "x.a.example",
               "x.a.example:443", "xyz.a.example"]
    assert sorted(ordered, key=lambda t: p(t).specificity) == ordered


def test_grant_set_indexes() -> None:
    state = parse_grant_texts({"a.toml": """
[[grant]]
id = "r"
tool = "read_file"
mode = "allow"
paths = ["/a", "/b"]
[[grant]]
id = "h"
tool = "http_fetch"
mode = "allow"
hosts = ["x.example", "*.x.example:8443"]
"""})
    assert isinstance(state, GrantSet)
    assert [g.id for g in state.by_tool["read_file"]] == ["r"]
    assert {(tool, path) for tool, paths in state.by_path.items() for path in paths} == {
        ("read_file", "/a"), ("read_file", "/b")}
    assert set(state.by_host) == {(False, "x.example"), (True, "x.example")}
    assert state.get("h") is not None and state.get("nope") is None
    assert state.ok and state.report.count == 2


def test_a_path_of_one_grant_is_the_grant_and_a_shared_one_a_tuple() -> None:
    """by_path holds the grant itself for a path no other grant of the tool has (no
    tuple of one: issue 23), and the grants in grant order for a shared one."""
    state = parse_grant_texts({"a.toml": """
[[grant]]
id = "one"
tool = "read_file"
mode = "allow"
paths = ["/a", "/s"]
[[grant]]
id = "two"
tool = "read_file"
mode = "allow"
paths = ["/s", "/s"]
[[grant]]
id = "three"
tool = "read_file"
mode = "deny"
paths = ["/s/x"]
[[grant]]
id = "four"
tool = "list_dir"
mode = "allow"
paths = ["/s"]
"""})
    assert isinstance(state, GrantSet)
    files = state.by_path["read_file"]
    assert isinstance(files["/a"], Grant) and files["/a"].id == "one"
    assert [g.id for g in path_grants(files["/s"])] == ["one", "two", "two"]
    assert [g.id for g in path_grants(files.get("/nope"))] == []
    assert [g.id for g in path_grants(state.by_path["list_dir"]["/s"])] == ["four"]
    protected = ProtectedPaths.of([])
    public = Taint(label="public", untrusted=False)
    below = decide(ToolCall(tool="read_file", args={"path": "/s/y"}), public, state, protected)
    assert below.allowed and below.grant == "one"  # one and two tie on /s: the smaller id
    at = decide(ToolCall(tool="read_file", args={"path": "/s"}), public, state, protected)
    assert at.allowed and at.grant == "one"
    denied = decide(ToolCall(tool="read_file", args={"path": "/s/x/z"}), public, state, protected)
    assert not denied.allowed and denied.grant == "three"


def test_report_round_trip() -> None:
    report = GrantsReport(ok=True, count=0, digest=EMPTY_DIGEST, problems=[])
    doc = unstructure(report)
    assert doc == {"ok": True, "count": 0, "digest": EMPTY_DIGEST, "problems": []}
    assert structure(doc, GrantsReport) == report


def test_report_fits_the_admin_wire_message() -> None:
    """brokerd answers `grants_check` with the wire's GrantsReport: same shape."""
    from pathlib import Path

    from boxmaker.policy._load import load_grants
    from boxmaker.proto.wire import _wire_admin

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "grants"
    for case in ("valid", "several-problems", "G1-file", "G8-hosts"):
        doc = unstructure(load_grants(fixtures / case).report)
        assert unstructure(structure(doc, _wire_admin.GrantsReport)) == doc


FILE_TOOL_NAMES = ("read_file", "list_dir", "write_file")


def _walked_deny_paths(grant_set: GrantSet, tool: str) -> tuple[str, ...]:
    """The walk per call that the index replaced (issue 23), kept as the oracle."""
    tools = FILE_TOOL_NAMES if tool == "write_file" else (tool,)
    out: list[str] = []
    for grant in grant_set.grants:
        if grant.mode == "deny" and grant.tool in tools:
            out += [p for p in grant.paths if p not in out]
    return tuple(out)


@given(st.lists(st.tuples(st.sampled_from(FILE_TOOL_NAMES), st.sampled_from(["allow", "deny",
                                                                            "ask"]),
                          st.lists(st.sampled_from(["/a", "/a/b", "/c", "/d/e"]), min_size=1,
                                   max_size=3, unique=True)), max_size=12))
def test_the_deny_path_index_is_the_walk(specs: list[tuple[str, str, list[str]]]) -> None:
    text = "".join(
        f'[[grant]]\nid = "g{n}"\ntool = "{tool}"\nmode = "{mode}"\npaths = {paths!r}\n'
        .replace("'", '"') for n, (tool, mode, paths) in enumerate(specs))
    state = parse_grant_texts({"a.toml": text})
    assert isinstance(state, GrantSet), state
    for tool in FILE_TOOL_NAMES:
        assert state.deny_paths[tool] == _walked_deny_paths(state, tool)
    assert all(state.get(f"g{n}") is state.grants[n] for n in range(len(specs)))
    assert state.get("nope") is None
