"""Grants for MCP tools (12-tool-sources): G4 for `mcp.<id>.<local>`, G2 for their
fields, G10 for `args`; a valid MCP grant keeps its constraints."""

from __future__ import annotations

import pytest

from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._mcp_grants import is_mcp_tool
from boxmaker.policy._model import GrantSet


def grant(body: str) -> str:
    return f'[[grant]]\nid = "g"\n{body}\n'


def test_an_mcp_grant_keeps_its_args() -> None:
    state = parse_grant_texts({"a.toml": grant(
        'tool = "mcp.git.git_log"\nmode = "allow"\nlabel = "private"\n'
        'args.repo_path = { paths = ["/home/me/notes"] }\nargs.max_count = { max = 200 }')})
    assert isinstance(state, GrantSet), state.report.problems
    (made,) = state.grants
    assert made.args == {"repo_path": {"paths": ["/home/me/notes"]}, "max_count": {"max": 200}}
    assert made.label == "private" and made.untrusted is False and made.paths == ()


@pytest.mark.parametrize(("body", "rule"), [
    ('tool = "mcp.Git.git_log"\nmode = "allow"', "G4"),
    ('tool = "mcp.git.a.b"\nmode = "allow"', "G4"),
    ('tool = "mcp.git"\nmode = "allow"', "G4"),
    ('tool = "mcp.git.git_log"\nmode = "allow"\npaths = ["/x"]', "G2"),
    ('tool = "mcp.git.git_log"\nmode = "allow"\nhosts = ["a.example"]', "G2"),
    ('tool = "mcp.git.git_log"\nmode = "deny"\nlabel = "private"', "G2"),
    ('tool = "mcp.git.git_log"\nmode = "allow"\nargs = 5', "G10"),
    ('tool = "mcp.git.git_log"\nmode = "allow"\nargs.x = 5', "G10"),
    ('tool = "mcp.git.git_log"\nmode = "allow"\nargs.x = { nope = 1 }', "G10"),
    ('tool = "mcp.git.git_log"\nmode = "allow"\nargs.x = { optional = 1 }', "G10"),
])
def test_refused(body: str, rule: str) -> None:
    state = parse_grant_texts({"a.toml": grant(body)})
    assert not state.ok
    assert [p.rule for p in state.report.problems] == [rule]


def test_the_name_grammar() -> None:
    assert is_mcp_tool("mcp.git.git_log") and is_mcp_tool("mcp.fs.admin_tools-list")
    assert not is_mcp_tool("mcp.git.") and not is_mcp_tool("read_file")
    assert not is_mcp_tool("mcp.git.a.b") and not is_mcp_tool(5)
