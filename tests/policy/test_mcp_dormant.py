"""Dormant grants (12-tool-sources "Grants for tool-source tools"): every grant for an
`mcp.*` tool that matches nothing against the registry, with its rule; a pin change
makes grants dormant, never the set invalid; a deny grant that does not fit disables
its tool."""

from __future__ import annotations

from typing import Any

from boxmaker.brokerd._admin import grants_report
from boxmaker.policy._decide import decide
from boxmaker.policy._decision import NO_PROTECTED_PATHS, Decision, ToolCall
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._mcp_dormant import dormant_grants, dormant_json, dormant_lines
from boxmaker.policy._mcp_verdict import McpRegistry
from boxmaker.policy._model import GrantSet
from boxmaker.proto._taint import NEW_SESSION
from tests.policy._mcp_git import LOG_NOTES, LOG_OPEN, git_registry, git_source, log_schema

SOURCE = git_source("public")
OLD = [{"name": "git_log", "description": "Log.",
        "inputSchema": log_schema(max_count={"type": "integer"})},
       {"name": "git_show", "description": "Show\u200b.", "inputSchema": {"type": "object"}}]
NEW = [{"name": "git_log", "description": "Log.", "inputSchema": log_schema()}]

GRANTS = LOG_NOTES + LOG_OPEN + '''
[[grant]]
id = "show"
tool = "mcp.git.git_show"
mode = "ask"

[[grant]]
id = "gone"
tool = "mcp.git.git_push"
mode = "deny"

[[grant]]
id = "other"
tool = "mcp.fetch.fetch"
mode = "ask"

[[grant]]
id = "echo"
tool = "echo"
mode = "allow"
'''


def registry(tools: list[dict[str, Any]] | None) -> McpRegistry:
    return git_registry(SOURCE, tools)


def grant_set(text: str = GRANTS) -> GrantSet:
    state = parse_grant_texts({"a.toml": text})
    assert isinstance(state, GrantSet), state.report
    return state


def rules(reg: McpRegistry, text: str = GRANTS) -> dict[str, str | None]:
    return {d.grant: d.rule for d in dormant_grants(grant_set(text), reg)}


def test_every_grant_matching_nothing_is_listed_with_its_rule() -> None:
    found = dormant_grants(grant_set(), registry(OLD))
    assert [(d.index, d.grant, d.rule) for d in found] == [
        (1, "log-open", "G13"), (2, "show", "S17"), (3, "gone", None), (4, "other", None)]
    assert "repo_path" in found[0].reason
    assert "no tool of that name" in found[2].reason
    assert "no source declares the MCP server fetch" in found[3].reason
    assert dormant_json(found)[0] == {"file": "a.toml", "index": 1, "grant": "log-open",
                                      "rule": "G13", "reason": found[0].reason}
    assert dormant_lines(found)[3].startswith("dormant a.toml grant 4 (other): no source")


def test_an_unpinned_server_makes_its_grants_dormant() -> None:
    found = dormant_grants(grant_set(), registry(None))
    assert {d.grant for d in found} == {"log-notes", "log-open", "show", "gone", "other"}
    assert all(d.rule is None for d in found)
    assert "unpinned (drifted)" in found[0].reason


def test_a_pin_change_makes_grants_dormant_never_invalid() -> None:
    before = grants_report(grant_set(), registry(OLD))
    after = grants_report(grant_set(), registry(NEW))  # max_count is gone: G11
    assert before.ok and after.ok and before.count == after.count == 6
    assert before.dormant is not None and after.dormant is not None
    assert "log-notes" not in {d.grant for d in before.dormant}
    assert {d.grant: d.rule for d in after.dormant}["log-notes"] == "G11"
    made = decide(ToolCall(tool="mcp.git.git_log", args={"repo_path": "/home/me/notes/a"}),
                  NEW_SESSION, grant_set(), NO_PROTECTED_PATHS, registry(NEW))
    assert isinstance(made, Decision) and made.code == "no_grant"
    # brokerd without tool sources leaves the list out
    assert grants_report(grant_set(), None).dormant is None


def test_a_deny_grant_that_does_not_fit_disables_its_tool() -> None:
    text = GRANTS + '''
[[grant]]
id = "no-secret"
tool = "mcp.git.git_log"
mode = "deny"
args.nope = { max_bytes = 3 }
'''
    found = rules(registry(OLD), text)
    assert found["log-notes"] == found["no-secret"] == "G11"
    made = decide(ToolCall(tool="mcp.git.git_log", args={"repo_path": "/home/me/notes/a"}),
                  NEW_SESSION, grant_set(text), NO_PROTECTED_PATHS, registry(OLD))
    assert isinstance(made, Decision) and made.code == "unknown_tool"
    assert "disabled (G11) by the deny grant no-secret" in made.reason


def test_an_invalid_source_set_makes_every_mcp_grant_dormant() -> None:
    invalid = McpRegistry(valid=False, digest="d" * 64, servers={})
    found = rules(invalid)
    assert set(found) == {"log-notes", "log-open", "show", "gone", "other"}
