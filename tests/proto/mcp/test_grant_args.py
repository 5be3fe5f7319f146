"""Grants for MCP tools against the pinned tool: G10 without the pin, G11..G14 with it."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto.mcp._arguments import tool_grammar
from boxmaker.proto.mcp._decl_tool import Egress, ToolTable
from boxmaker.proto.mcp._grant_args import g10_problems, grant_problems
from tests.proto.mcp.test_profile import PYDANTIC_FETCH, PYDANTIC_GIT

FETCH = tool_grammar(PYDANTIC_FETCH, ToolTable(mcp_name="fetch", args={"url": "url"},
                                               egress=Egress(word="arg", argument="url")))
GIT = tool_grammar(PYDANTIC_GIT, ToolTable(mcp_name="git_add",
                                           args={"repo_path": "path", "files": "path"}))
HOSTS = tool_grammar({"type": "object", "properties": {
    "h": {"type": "string"}, "n": {"type": "integer", "enum": [1, 2]},
    "o": {"type": "object", "properties": {}}}}, ToolTable(mcp_name="x", args={"h": "host"}))
OPAQUE = tool_grammar({"type": "object", "not": {}}, None)


def rules(grammar: Any, args: dict[str, Any], mode: str = "allow",
          when_untrusted: str | None = None) -> list[tuple[str, str]]:
    return grant_problems(grammar, mode=mode, when_untrusted=when_untrusted, args=args)


def test_the_specs_grants_hold() -> None:
    assert rules(FETCH, {"url": {"hosts": ["docs.python.org", "*.readthedocs.io"]},
                         "raw": {"value": False}}, mode="ask") == []
    assert rules(GIT, {"repo_path": {"paths": ["/home/me/notes"]},
                       "files": {"paths": ["/home/me/notes"], "max_items": 10},
                       "mode": {"values": ["soft"]},
                       "start_timestamp": {"optional": True, "prefixes": ["2026-"]}}) == []
    assert rules(FETCH, {}, mode="deny") == []
    assert rules(FETCH, {"max_length": {"min": 1, "max": 200}, "url": {"hosts": ["a.example"],
                                                                       "http": True}}) == []


@pytest.mark.parametrize(("grammar", "args", "rule", "fragment"), [
    (FETCH, {"url": {"hosts": ["a.example"]}, "nope": {"value": True}}, "G11", "args.nope"),
    (FETCH, {"url": {"hosts": ["a.example"]}, "raw": {"min": 1}}, "G12", "for a boolean"),
    (FETCH, {"url": {"paths": ["/x"], "hosts": ["a.example"]}}, "G12", "for a url string"),
    (FETCH, {"url": {"hosts": ["10.0.0.1"]}}, "G12", "host grammar"),
    (FETCH, {"url": {"hosts": []}}, "G12", "non-empty"),
    (FETCH, {"url": {"hosts": ["a.example"], "http": "yes"}}, "G12", "true or false"),
    (FETCH, {"url": {"hosts": ["a.example"]}, "max_length": {"min": 1.5}}, "G12",
     "expected an integer"),
    (FETCH, {"url": {"hosts": ["a.example"]}, "max_length": {"min": 5, "max": 1}}, "G12",
     "min at most max"),
    (GIT, {"repo_path": {"paths": ["relative"]}, "files": {"paths": ["/a"]}}, "G12",
     "path grammar"),
    (GIT, {"repo_path": {"paths": ["/a"]}, "files": {"paths": ["/a"]},
           "mode": {"values": ["medium"]}}, "G12", "schema's enum"),
    (GIT, {"repo_path": {"paths": ["/a"]}, "files": {"paths": ["/a"], "max_items": -1}},
     "G12", "non-negative"),
    (GIT, {"repo_path": {"paths": ["/a"]}, "files": {"paths": ["/a"]},
           "start_timestamp": {"max_bytes": "9"}}, "G12", "non-negative"),
    (HOSTS, {"h": {"hosts": ["a.example:443"]}}, "G12", "takes no port"),
    (HOSTS, {"h": {"hosts": ["a.example"]}, "n": {"values": [3]}}, "G12", "schema's enum"),
    (HOSTS, {"h": {"hosts": ["a.example"]}, "n": {"values": [1.0]}}, "G12", "schema's enum"),
    (HOSTS, {"h": {"hosts": ["a.example"]}, "o": {"values": ["x"]}}, "G12", "for an object"),
    (FETCH, {}, "G13", "args.url: expected hosts for a url argument"),
    (FETCH, {"url": {"optional": True}}, "G13", "unconstrained"),
    (GIT, {"repo_path": {"paths": ["/a"]}}, "G13", "args.files"),
    (OPAQUE, {}, "G14", "mode: expected ask or deny"),
])
def test_each_rule(grammar: Any, args: dict[str, Any], rule: str, fragment: str) -> None:
    found = rules(grammar, args)
    assert [r for r, _ in found] == [rule], found
    assert fragment in found[0][1] and "expected" in found[0][1]


def test_opaque_tools_ask_or_deny_without_args() -> None:
    assert rules(OPAQUE, {}, mode="ask") == []
    assert rules(OPAQUE, {}, mode="deny") == []
    assert [r for r, _ in rules(OPAQUE, {"a": {"values": ["x"]}}, mode="ask",
                                when_untrusted="allow")] == ["G14", "G14"]


def test_g10() -> None:
    assert g10_problems({"url": {"hosts": ["a.example"], "optional": False}}) == []
    assert g10_problems([]) == ["args: expected a table of tables, found an array"]
    assert g10_problems({"url": "x"}) == ["args.url: expected a table of constraints, "
                                          "found a string"]
    found = g10_problems({"url": {"glob": 1, "optional": "no"}})
    assert len(found) == 2 and 'found "glob"' in found[0] and "optional" in found[1]
