"""The policy's answers are brokerd's verdicts (an allowed or denied Decision, an Ask),
with protected paths."""

from __future__ import annotations

from boxmaker.brokerd._policy_link import PolicyLink
from boxmaker.policy._decision import Ask, Decision
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.proto._taint import NEW_SESSION

GRANTS = parse_grant_texts({"g.toml": """
[[grant]]
id = "notes"
tool = "read_file"
mode = "allow"
paths = ["/srv"]
label = "private"

[[grant]]
id = "docs"
tool = "http_fetch"
mode = "ask"
hosts = ["docs.python.org"]
"""})


def test_verdicts() -> None:
    link = PolicyLink.of(["/srv/boxmaker"])
    allowed = link.decide("read_file", {"path": "/srv/notes/a"}, NEW_SESSION, GRANTS)
    assert isinstance(allowed, Decision) and allowed.allowed and allowed.grant == "notes"
    assert allowed.label == "private" and allowed.untrusted is False
    spec = link.run_spec(call_id=4, session="s1", tool="read_file",
                         args={"path": "/srv/notes/a"}, allow=allowed)
    assert spec.grant_entry == "/srv" and spec.label == "private"
    protected = link.decide("read_file", {"path": "/srv/boxmaker/audit/x"}, NEW_SESSION, GRANTS)
    assert isinstance(protected, Decision) and protected.code == "protected"
    asked = link.decide("http_fetch", {"url": "https://docs.python.org/3/"}, NEW_SESSION,
                        GRANTS)
    assert isinstance(asked, Ask) and asked.grant == "docs"
    assert asked.untrusted is True
    again = link.redecide(asked, NEW_SESSION, GRANTS)
    assert isinstance(again, Decision) and again.allowed
    denied = link.redecide(asked, NEW_SESSION, parse_grant_texts({}))
    assert isinstance(denied, Decision) and denied.code == "changed"


def test_an_mcp_run_spec_carries_the_winners_path_entries_and_the_denied_paths() -> None:
    from boxmaker.policy._mcp_verdict import McpRegistry, RegisteredServer
    from boxmaker.proto.mcp import (
        SourceSet,
        make_pin,
        parse_source_texts,
        pin_source,
        pin_tools,
        tool_verdicts,
    )

    sources = parse_source_texts({"f.toml": '''
[[mcp_server]]
id = "git"
image = "sha256:''' + "ab" * 32 + '''"
command = ["/usr/bin/git-server"]
label = "private"
[mcp_server.tool.log]
args = { repo = "path" }
'''})
    assert isinstance(sources, SourceSet)
    decl = sources.servers["git"]
    tools = [{"name": "log", "description": "Log.", "inputSchema": {
        "type": "object", "required": ["repo"], "properties": {"repo": {"type": "string"}}}}]
    pin = make_pin(server="git", protocol="2026-07-28", source=pin_source(decl),
                   tools=pin_tools(tools, ()), server_info=None, instructions=None,
                   pinned_at="2026-12-02T10:00:00.000000Z", by=0)
    registry = McpRegistry(valid=True, digest="d", servers={"git": RegisteredServer(
        decl=decl, pin=pin.digest, unpinned=None, verdicts=tool_verdicts(decl, pin))})
    grants = parse_grant_texts({"g.toml": """
[[grant]]
id = "repos"
tool = "mcp.git.log"
mode = "allow"
max_label = "private"
args.repo = { paths = ["/srv", "/srv/repos"] }

[[grant]]
id = "not-secret"
tool = "mcp.git.log"
mode = "deny"
args.repo = { paths = ["/srv/repos/secret"] }

[[grant]]
id = "no-keys"
tool = "read_file"
mode = "deny"
paths = ["/srv/repos/keys"]
"""})
    link = PolicyLink(PolicyLink.of([]).protected, registry=lambda: registry)
    allowed = link.decide("mcp.git.log", {"repo": "/srv/repos/a"}, NEW_SESSION, grants)
    assert isinstance(allowed, Decision) and allowed.allowed, allowed
    spec = link.run_spec(call_id=4, session="s1", tool="mcp.git.log",
                         args={"repo": "/srv/repos/a"}, allow=allowed, grants=grants)
    assert spec.mcp_paths == (("repo", ("/srv", "/srv/repos")),)
    assert spec.deny_paths == ("/srv/repos/keys", "/srv/repos/secret")
    assert spec.mcp_private_network == ()
