"""What explain and check print: the JSON shape, escaped text lines, the report summary."""

from __future__ import annotations

from boxmaker.policy._decide import decide
from boxmaker.policy._decision import NO_PROTECTED_PATHS, ToolCall
from boxmaker.policy._explain import (
    check_report_lines,
    explain_document,
    explain_lines,
    report_lines,
)
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.mcp import SourceProblem, SourcesReport

STATE = parse_grant_texts({"a.toml": """
[[grant]]
id = "docs-fetch"
tool = "http_fetch"
mode = "ask"
hosts = ["docs.python.org"]

[[grant]]
id = "python-any"
tool = "http_fetch"
mode = "allow"
hosts = ["*.python.org"]
when_untrusted = "ask"

[[grant]]
id = "ssh"
tool = "read_file"
mode = "deny"
paths = ["/home/me/.ssh"]
"""})
assert isinstance(STATE, GrantSet)


def test_document_of_an_ask() -> None:
    result = decide(ToolCall(tool="http_fetch", args={"url": "https://docs.python.org/"}),
                    Taint(label="private", untrusted=False), STATE, NO_PROTECTED_PATHS)
    assert explain_document(result)["code"] == "taint"
    result = decide(ToolCall(tool="http_fetch", args={"url": "https://docs.python.org/"}),
                    NEW_SESSION, STATE, NO_PROTECTED_PATHS)
    assert explain_document(result) == {
        "outcome": "ask", "code": None, "reason": result.reason, "grant": "docs-fetch",
        "label": "public", "untrusted": True, "matched": ["docs-fetch", "python-any"],
        "applicable": ["docs-fetch", "python-any"],
    }


def test_lines_of_a_denial() -> None:
    result = decide(ToolCall(tool="read_file", args={"path": "/home/me/.ssh/\x1b[0m"}),
                    NEW_SESSION, STATE, NO_PROTECTED_PATHS)
    assert explain_document(result)["code"] == "bad_args"
    result = decide(ToolCall(tool="read_file", args={"path": "/home/me/.ssh/id\u202e"}),
                    NEW_SESSION, STATE, NO_PROTECTED_PATHS)
    lines = explain_lines(result, STATE)
    assert lines == [
        "outcome     denied: denied_by_grant",
        "reason      grant ssh denies read_file of /home/me/.ssh/id\\u{202E} "
        "(mode deny, entry /home/me/.ssh)",
        "grant       ssh (deny), entry /home/me/.ssh",
        "session     public, trusted",
        "result      -",
        "matched     ssh (deny)",
        "applicable  ssh",
    ]


def test_lines_show_when_untrusted() -> None:
    result = decide(ToolCall(tool="http_fetch", args={"url": "https://www.python.org/"}),
                    Taint(label="public", untrusted=True), STATE, NO_PROTECTED_PATHS)
    lines = explain_lines(result, STATE)
    assert lines[0] == "outcome     ask"
    assert "when_untrusted ask: the session is untrusted" in lines[1]
    assert lines[2] == ("grant       python-any (allow, when_untrusted ask, max_label public), "
                        "entry *.python.org")


def test_report_lines() -> None:
    assert report_lines(STATE.report, "/g") == [
        f"ok: 3 grants in /g, digest {STATE.digest}"
    ]
    bad = parse_grant_texts({"x\n.toml": "[[grant]]\nid = 1\n"})
    lines = report_lines(bad.report, "/g\x1b")
    assert lines[0] == "G3 x\\n.toml grant 0: id must be a string, not an integer"
    assert lines[-1].startswith("not ok: 3 problems in 1 file of /g\\u{001B}; ")
    assert lines[-1].endswith("; every call is denied while the set is invalid. "
                              "See docs/runbook.md#grants-invalid")


def _sources_lines(report: SourcesReport) -> list[str]:
    return check_report_lines(report, "/s", noun="server",
                              runbook="docs/runbook.md#sources-invalid",
                              counted="MCP server", denied="every mcp.* call")


def test_the_same_lines_for_a_sources_report() -> None:
    """`bxctl mcp check`'s words: servers, MCP, mcp.* calls, the sources runbook."""
    one = SourcesReport(ok=True, count=1, digest="sha256:d", problems=())
    assert _sources_lines(one) == [
        "ok: 1 MCP server in /s, digest sha256:d"]
    none = SourcesReport(ok=True, count=0, digest="sha256:e", problems=())
    assert _sources_lines(none) == [
        "ok: 0 MCP servers in /s, digest sha256:e"]
    bad = SourcesReport(ok=False, count=0, digest="sha256:f", problems=(
        SourceProblem(file="a\x1b.toml", index=0, server="git", rule="S6", message="label"),
        SourceProblem(file="b.toml", index=None, server=None, rule="S1", message="toml")))
    assert _sources_lines(bad) == [
        "S6 a\\u{001B}.toml server 0 (git): label", "S1 b.toml: toml",
        "not ok: 2 problems in 2 files of /s; every mcp.* call is denied while the set is "
        "invalid. See docs/runbook.md#sources-invalid"]
