"""The git MCP server of the tests of grants for `mcp.*` tools (the policy's verdicts
and dormant grants, bxctl's offline `grants check|explain` and `mcp check|draft`): its
declaration, git_log's schema, the git_log grants, and its registry entry pinned to a
tool list (the pin of `pin_for`) or unpinned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boxmaker.policy._mcp_verdict import McpRegistry, RegisteredServer
from boxmaker.proto.mcp import tool_verdicts
from tests.brokerd._mcp_home import pin_for
from tests.brokerd.runner._mcp_fixtures import server_decl, server_toml

IMAGE = "sha256:" + "5b1c" * 16

LOG_NOTES = '''
[[grant]]
id = "log-notes"
tool = "mcp.git.git_log"
mode = "allow"
args.repo_path = { paths = ["/home/me/notes"] }
args.max_count = { max = 200 }
'''
"""Allow git_log on the notes, at most 200 entries: needs `max_count` in the pin."""

LOG_OPEN = '''
[[grant]]
id = "log-open"
tool = "mcp.git.git_log"
mode = "allow"
'''
"""Allow git_log without a paths constraint: dormant by G13 (repo_path is a path)."""


def git_source(label: str = "private", *, fetch: bool = False) -> str:
    """The git server's declaration: git_log's `repo_path` a path, with `fetch` a
    `fetch` tool whose `url` is a url."""
    tools = {"git_log": {"repo_path": "path"}}
    if fetch:
        tools["fetch"] = {"url": "url"}
    return server_toml(IMAGE, ["/usr/local/bin/mcp-server-git"], server="git", label=label,
                       protocol=None, start_timeout_ms=None, tools=tools)


def log_schema(**more: dict[str, Any]) -> dict[str, Any]:
    """git_log's inputSchema: `repo_path` required, and the `more` properties."""
    return {"type": "object", "required": ["repo_path"],
            "properties": {"repo_path": {"type": "string"}, **more}}


def git_registry(source: str, tools: Sequence[dict[str, Any]] | None) -> McpRegistry:
    """A valid registry of the git server of `source`: pinned to `tools`, or (None)
    unpinned since its pin drifted."""
    decl = server_decl(source, "git")
    if tools is None:
        server = RegisteredServer(decl=decl, pin=None, unpinned="drifted")
    else:
        pin = pin_for(source, "git", tools)
        server = RegisteredServer(decl=decl, pin=pin.digest, unpinned=None,
                                  verdicts=tool_verdicts(decl, pin))
    return McpRegistry(valid=True, digest="d" * 64, servers={"git": server})
