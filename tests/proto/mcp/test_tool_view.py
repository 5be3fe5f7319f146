"""What the model sees: only pinned (or the owner's) text, refs resolved, S17, verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto.mcp._decl import SourceSet, parse_source_texts
from boxmaker.proto.mcp._pin import make_pin, pin_source, pin_tools
from boxmaker.proto.mcp._tool_view import (
    hidden_in,
    resolve_refs,
    tool_verdicts,
)
from tests.proto.mcp.test_profile import PYDANTIC_GIT

IMAGE = "sha256:" + "ab" * 32


def verdicts(tools: list[dict[str, Any]], extra: str = "") -> Any:
    text = (f'[[mcp_server]]\nid = "git"\nimage = "{IMAGE}"\ncommand = ["/bin/srv"]\n'
            f'label = "private"\n{extra}')
    state = parse_source_texts({"a.toml": text})
    assert isinstance(state, SourceSet), state
    decl = state.servers["git"]
    pin = make_pin(server="git", protocol="2025-11-25", source=pin_source(decl),
                   tools=pin_tools(tools, ()), server_info=None, instructions=None,
                   pinned_at="2026-12-02T09:00:00.000000Z", by=0)
    return tool_verdicts(decl, pin)


@pytest.mark.parametrize(("text", "cp"), [
    ("plain text\nwith\ttabs", None), ("caf\u00e9 \u65e5\u672c", None),
    ("zero\u200bwidth", 0x200B), ("bidi \u202e override", 0x202E), ("\u2066isolate", 0x2066),
    ("nbsp\u00a0", 0x00A0), ("bell\x07", 0x07), ("cr\r", 0x0D), ("tag \U000e0041", 0xE0041),
    ("variation \ufe0f", 0xFE0F), ("box \u2500", 0x2500), ("a" + "\u0301" * 31, 0x0301),
    ("a" + "\u0301" * 30, None), ("private \ue000", 0xE000), ("del\x7f", 0x7F),
])
def test_hidden_code_points(text: str, cp: int | None) -> None:
    assert hidden_in(text) == cp


def test_refs_are_resolved_for_the_model_with_siblings_kept() -> None:
    resolved = resolve_refs(PYDANTIC_GIT)
    assert "$defs" not in resolved
    assert resolved["properties"]["mode"] == {"enum": ["soft", "hard"], "title": "Mode",
                                              "type": "string", "default": "soft"}


def test_an_offered_tool_as_the_model_sees_it() -> None:
    found = verdicts([{"name": "git_add", "description": "Adds files",
                       "inputSchema": PYDANTIC_GIT}])
    verdict = found["git_add"]
    assert verdict.status == "offered" and verdict.view is not None
    assert verdict.view.to_json() == {
        "name": "mcp.git.git_add", "model_name": "mcp__git__git_add",
        "description": "Adds files", "parameters": resolve_refs(PYDANTIC_GIT), "opaque": False}


def test_the_owners_description_replaces_the_servers() -> None:
    tool = {"name": "t", "description": "sneaky\u200b", "inputSchema": {"type": "object"}}
    assert verdicts([tool])["t"].rule == "S17"
    fixed = verdicts([tool], '[mcp_server.tool.t]\ndescription = "reads the log"\n')["t"]
    assert fixed.status == "offered" and fixed.view.description == "reads the log"


def test_s17_in_the_parameters_keys_included() -> None:
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "string", "description": "ok \u202e evil"}}}}
    found = verdicts([tool])["t"]
    assert found.rule == "S17"
    assert found.message == ("parameters /properties/a/description: expected no code point "
                             "that bxctl escapes, found U+202E")
    opaque = {"name": "o", "inputSchema": {"type": "object", "x-\u200b": 1, "not": {}}}
    found = verdicts([opaque])["o"]
    assert found.rule == "S17" and "U+200B" in (found.message or "")


def test_opaque_tools_are_offered_with_the_raw_schema() -> None:
    schema = {"type": "object", "properties": {"q": {"not": {"type": "string"}}}}
    found = verdicts([{"name": "o", "inputSchema": schema}])["o"]
    assert found.status == "offered" and found.opaque is not None
    assert found.view.parameters == schema and found.view.opaque is True
    assert found.view.description == ""


def test_names_kinds_and_the_filter() -> None:
    tools = [{"name": "a.b", "inputSchema": {"type": "object"}},
             {"name": "c", "inputSchema": {"type": "object"}},
             {"name": "k", "inputSchema": {"type": "object"}},
             {"name": "f", "inputSchema": {"type": "object"}}]
    extra = ('tools = ["a.b", "c", "k"]\n[mcp_server.tool.k]\nargs = { nope = "path" }\n')
    found = verdicts(tools, extra)
    assert {n: (v.status, v.rule) for n, v in found.items()} == {
        "a.b": ("unnamed", None), "c": ("offered", None), "k": ("disabled", "S13"),
        "f": ("filtered", None)}
    found = verdicts(tools, '[mcp_server.tool."a.b"]\nalias = "c"\n')
    assert (found["a.b"].rule, found["c"].rule) == ("S16", "S16")


def test_the_tools_answer_orders_digests_and_leaves_out_a_server_whole() -> None:
    from boxmaker.proto.mcp._canonical import canonical_sha256
    from boxmaker.proto.mcp._tool_view import tools_answer
    a = verdicts([{"name": "z", "inputSchema": {"type": "object"}},
                  {"name": "b", "inputSchema": {"type": "object"}},
                  {"name": "bad\u200b", "inputSchema": {"type": "object"}}])
    answer, left = tools_answer({"zz": a, "git": a})
    names = [item["name"] for item in answer["items"]]
    assert names == ["mcp.git.b", "mcp.git.z", "mcp.git.b", "mcp.git.z"]  # both built as git
    assert answer["digest"] == canonical_sha256(answer["items"]) and left == []
    one = len(tools_answer({"git": a})[0]["items"])
    from boxmaker.proto.mcp._canonical import canonical_bytes
    first = tools_answer({"git": a})[0]["items"]
    bound = 2 + sum(len(canonical_bytes(item)) + 1 for item in first)
    answer, left = tools_answer({"git": a, "zz": a}, max_bytes=bound)
    assert left == ["zz"] and len(answer["items"]) == one


def test_suggested_kinds() -> None:
    from boxmaker.proto.mcp._arguments import tool_grammar
    from boxmaker.proto.mcp._tool_view import suggested_kinds
    from tests.proto.mcp.test_profile import PYDANTIC_FETCH
    schema = {"type": "object", "properties": {
        "repo_path": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}},
        "out_dir": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "server": {"type": "string", "format": "hostname"}, "count": {"type": "integer"},
        "opts": {"type": "object", "properties": {"config_file": {"type": "string"}}}}}
    assert suggested_kinds(tool_grammar(schema, None), schema) == {
        "repo_path": "path", "out_dir": "path", "server": "host", "opts.config_file": "path"}
    assert suggested_kinds(tool_grammar(PYDANTIC_FETCH, None), PYDANTIC_FETCH) == {"url": "url"}
    opaque = {"type": "object", "not": {}, "properties": {"p": {"type": "string"}}}
    assert suggested_kinds(tool_grammar(opaque, None), opaque) == {}


def test_unused_entries_are_listed_not_refused() -> None:
    from boxmaker.proto.mcp._decl import SourceSet, parse_source_texts
    from boxmaker.proto.mcp._tool_view import unused_entries
    text = (f'[[mcp_server]]\nid = "git"\nimage = "{IMAGE}"\ncommand = ["/bin/srv"]\n'
            'label = "private"\ntools = ["t", "gone"]\n[mcp_server.tool.old]\nopaque = true\n')
    state = parse_source_texts({"a.toml": text})
    assert isinstance(state, SourceSet)
    decl = state.servers["git"]
    pin = make_pin(server="git", protocol="2025-11-25", source=pin_source(decl),
                   tools=pin_tools([{"name": "t"}], ()), server_info=None, instructions=None,
                   pinned_at="2026-12-02T09:00:00.000000Z", by=0)
    assert unused_entries(decl, pin) == (["gone"], ["old"])
