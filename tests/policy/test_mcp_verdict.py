"""`judge_mcp` and `decide` for `mcp.*` calls (12-tool-sources "Deciding"), pure:
the registry's states, effective arguments, path kinds against protected paths,
constraints, dormant grants, the strictest mode, D8 with the server's label, and a
re-decision after the pin changed."""

from __future__ import annotations

from typing import Any

import attrs

from boxmaker.policy._decide import decide, redecide
from boxmaker.policy._decision import NO_PROTECTED_PATHS, Ask, Decision, ProtectedPaths, ToolCall
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._mcp_verdict import McpRegistry, RegisteredServer
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.mcp import SourceSet, parse_source_texts, tool_verdicts
from tests.brokerd._mcp_home import pin_for

IMAGE = "sha256:" + "5b1c" * 16
SOURCE = f'''[[mcp_server]]
id = "git"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-git"]
label = "private"
[mcp_server.tool.git_log]
args = {{ repo_path = "path" }}
'''
SCHEMA = {"type": "object", "required": ["repo_path"],
          "properties": {"repo_path": {"type": "string"},
                         "max_count": {"type": "integer", "default": 10}}}
TOOLS = [{"name": "git_log", "description": "Log.", "inputSchema": SCHEMA},
         {"name": "git_any", "description": "Any.", "inputSchema": {"type": "object",
                                                                    "not": {}}}]


def registry(pinned: bool = True) -> McpRegistry:
    state = parse_source_texts({"s.toml": SOURCE})
    assert isinstance(state, SourceSet)
    decl = state.servers["git"]
    pin = pin_for(SOURCE, "git", TOOLS)
    server = RegisteredServer(decl=decl, pin=pin.digest if pinned else None,
                              unpinned=None if pinned else "drifted",
                              verdicts=tool_verdicts(decl, pin) if pinned else {})
    return McpRegistry(valid=True, digest="d" * 64, servers={"git": server})


def grants(text: str) -> Any:
    return parse_grant_texts({"a.toml": text})


ALLOW = '''
[[grant]]
id = "log-notes"
tool = "mcp.git.git_log"
mode = "allow"
args.repo_path = { paths = ["/home/me/notes"] }
args.max_count = { max = 200 }
'''


def call(args: dict[str, Any], tool: str = "mcp.git.git_log", *, taint: Taint = NEW_SESSION,
         text: str = ALLOW, reg: McpRegistry | None = None,
         protected: ProtectedPaths = NO_PROTECTED_PATHS) -> Decision | Ask:
    return decide(ToolCall(tool=tool, args=args), taint, grants(text), protected,
                  reg if reg is not None else registry())


def test_allowed_with_defaults_filled_and_the_servers_label() -> None:
    made = call({"repo_path": "/home/me/notes/x"})
    assert isinstance(made, Decision) and made.allowed, made.reason
    assert made.effective_args == {"repo_path": "/home/me/notes/x", "max_count": 10}
    assert made.pin == registry().servers["git"].pin
    assert (made.label, made.untrusted) == ("private", True)  # the server's, D8


def test_each_refusal_has_its_code() -> None:
    def code(*args: Any, **kwargs: Any) -> str | None:
        made = call(*args, **kwargs)
        assert isinstance(made, Decision)
        return made.code

    assert code({"repo_path": "/etc"}) == "no_grant"
    assert code({"repo_path": "/home/me/notes", "max_count": 201}) == "no_grant"
    assert code({"repo_path": "notes"}) == "bad_args"  # a path kind: the path grammar
    assert code({"repo_path": "/home/me/notes", "x": 1}) == "bad_args"  # closed
    assert code({"repo_path": "/home/me/notes/.bm"},
                protected=ProtectedPaths.of(["/home/me/notes/.bm"])) == "protected"
    assert code({}, "mcp.git.nothing") == "unknown_tool"
    assert code({}, "mcp.other.x") == "unknown_tool"
    assert code({"repo_path": "/home/me/notes"}, reg=registry(pinned=False)) == \
        "source_unpinned"
    invalid = McpRegistry(valid=False, digest="e" * 64)
    assert code({"repo_path": "/home/me/notes"}, reg=invalid) == "sources_invalid"
    assert code({"repo_path": "/home/me/notes"}, text="[[grant]]\nid = 5\n") == \
        "grants_invalid"
    deny = ALLOW + '\n[[grant]]\nid = "no-secrets"\ntool = "mcp.git.git_log"\nmode = "deny"\n' \
                   'args.repo_path = { paths = ["/home/me/notes/secret"] }\n'
    assert code({"repo_path": "/home/me/notes/secret/a"}, text=deny) == "denied_by_grant"
    assert code({"repo_path": "/home/me/notes/a"}, text=deny) is None


def test_dormant_grants_match_nothing() -> None:
    # G13: a path argument left unconstrained; G11: an argument the schema lacks.
    g13 = '[[grant]]\nid = "g"\ntool = "mcp.git.git_log"\nmode = "allow"\n'
    g11 = g13 + 'args.nope = { max_bytes = 3 }\nargs.repo_path = { paths = ["/home"] }\n'
    for text in (g13, g11):
        made = call({"repo_path": "/home/me/notes"}, text=text)
        assert isinstance(made, Decision) and made.code == "no_grant"
    # G14: an opaque tool takes only ask or deny, without args.
    opaque = '[[grant]]\nid = "o"\ntool = "mcp.git.git_any"\nmode = "ask"\n'
    asked = call({"anything": [1]}, "mcp.git.git_any", text=opaque)
    assert isinstance(asked, Ask) and asked.effective_args == {"anything": [1]}
    allowed = call({}, "mcp.git.git_any", text=opaque.replace('"ask"', '"allow"'))
    assert isinstance(allowed, Decision) and allowed.code == "no_grant"


def test_a_changed_pin_between_ask_and_approve_is_changed() -> None:
    text = ALLOW.replace('"allow"', '"ask"')
    asked = call({"repo_path": "/home/me/notes"}, text=text)
    assert isinstance(asked, Ask)
    same = redecide(asked, NEW_SESSION, grants(text), NO_PROTECTED_PATHS, registry())
    assert same.allowed and same.effective_args == asked.effective_args
    moved = registry()
    other = attrs.evolve(moved.servers["git"], pin="f" * 64)
    again = redecide(asked, NEW_SESSION, grants(text), NO_PROTECTED_PATHS,
                     attrs.evolve(moved, servers={"git": other}))
    assert again.code == "changed" and "the tool source" in again.reason
