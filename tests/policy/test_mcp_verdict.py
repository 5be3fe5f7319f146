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
from boxmaker.policy._mcp_verdict import McpRegistry
from boxmaker.proto._taint import NEW_SESSION, Taint
from tests.policy._mcp_git import LOG_NOTES, git_registry, git_source, log_schema

SOURCE = git_source()
SCHEMA = log_schema(max_count={"type": "integer", "default": 10})
TOOLS = [{"name": "git_log", "description": "Log.", "inputSchema": SCHEMA},
         {"name": "git_any", "description": "Any.", "inputSchema": {"type": "object",
                                                                    "not": {}}}]


def registry(pinned: bool = True) -> McpRegistry:
    return git_registry(SOURCE, TOOLS if pinned else None)


def grants(text: str) -> Any:
    return parse_grant_texts({"a.toml": text})


ALLOW = LOG_NOTES


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
