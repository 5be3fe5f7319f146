"""Grant values: host pattern matching and specificity, the indexed set, the report shape."""

from __future__ import annotations

from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import EMPTY_DIGEST, GrantSet, GrantsReport, HostPattern
from boxmaker.proto._convert import structure, unstructure


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
    assert set(state.by_path) == {("read_file", "/a"), ("read_file", "/b")}
    assert set(state.by_host) == {(False, "x.example"), (True, "x.example")}
    assert state.get("h") is not None and state.get("nope") is None
    assert state.ok and state.report.count == 2


def test_report_round_trip() -> None:
    report = GrantsReport(ok=True, count=0, digest=EMPTY_DIGEST, problems=[])
    doc = unstructure(report)
    assert doc == {"ok": True, "count": 0, "digest": EMPTY_DIGEST, "problems": []}
    assert structure(doc, GrantsReport) == report


def test_report_fits_the_admin_wire_message() -> None:
    """brokerd answers `grants_check` with the wire's GrantsReport: same shape."""
    from pathlib import Path

    from boxmaker.policy._load import load_grants
    from boxmaker.proto import _wire_admin

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "grants"
    for case in ("valid", "several-problems", "G1-file", "G8-hosts"):
        doc = unstructure(load_grants(fixtures / case).report)
        assert unstructure(structure(doc, _wire_admin.GrantsReport)) == doc
