"""Effective arguments: defaults filled, kinds checked by the grammars, opaque tools, S13."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto.mcp._arguments import (
    effective_args,
    kind_problems,
    kinded_values,
    tool_grammar,
)
from boxmaker.proto.mcp._decl_tool import Egress, ToolTable
from boxmaker.proto.mcp._validate import ArgumentError
from tests.proto.mcp.test_profile import PYDANTIC_FETCH, PYDANTIC_GIT

NESTED = {"type": "object", "required": ["opts"], "properties": {
    "opts": {"type": "object", "properties": {
        "path": {"type": "string"}, "d": {"type": "integer", "default": 1},
        "inner": {"type": "object", "properties": {"x": {"type": "string", "default": "y"}},
                  "default": {}}}},
    "list": {"type": "array", "items": {"type": "object", "properties": {
        "p": {"type": "string"}}}},
    "urls": {"type": "array", "items": {"type": ["string", "null"]}},
    "n": {"type": "integer"}}}


def test_fetchs_defaults_are_filled_and_the_url_checked() -> None:
    grammar = tool_grammar(PYDANTIC_FETCH, ToolTable(mcp_name="fetch", args={"url": "url"},
                                                     egress=Egress(word="arg", argument="url")))
    args = effective_args(grammar, {"url": "https://docs.python.org/3/"})
    assert args == {"url": "https://docs.python.org/3/", "max_length": 5000, "start_index": 0,
                    "raw": False}
    with pytest.raises(ArgumentError) as caught:
        effective_args(grammar, {"url": "https://10.0.0.1/"})
    assert (caught.value.path, caught.value.rule) == ("/url", "kind:url")
    with pytest.raises(ArgumentError):
        effective_args(grammar, {"url": "https://Docs.python.org/"})  # never normalised
    assert kind_problems(grammar, ToolTable(mcp_name="fetch", args={"url": "url"},
                                            egress=Egress(word="arg", argument="url"))) == []


def test_gits_nullable_default_and_path_array() -> None:
    table = ToolTable(mcp_name="git_add", args={"repo_path": "path", "files": "path"})
    grammar = tool_grammar(PYDANTIC_GIT, table)
    args = effective_args(grammar, {"repo_path": "/home/me/r", "files": ["/home/me/r/a"]})
    assert args["start_timestamp"] is None and args["mode"] == "soft"
    assert kinded_values(grammar, args) == [("files", "path", "/home/me/r/a"),
                                            ("repo_path", "path", "/home/me/r")]
    with pytest.raises(ArgumentError) as caught:
        effective_args(grammar, {"repo_path": "/home/me/r", "files": ["/a", "../x"]})
    assert caught.value.path == "/files/1" and caught.value.rule == "kind:path"


def test_defaults_fill_inside_present_objects_but_not_inside_a_filled_default() -> None:
    grammar = tool_grammar(NESTED, ToolTable(mcp_name="t", args={"opts.path": "write_path"}))
    args = effective_args(grammar, {"opts": {}})
    assert args == {"opts": {"d": 1, "inner": {}}}
    args = effective_args(grammar, {"opts": {"inner": {}, "path": "/tmp/x"}})
    assert args == {"opts": {"d": 1, "inner": {"x": "y"}, "path": "/tmp/x"}}
    with pytest.raises(ArgumentError, match="kind write_path"):
        effective_args(grammar, {"opts": {"path": "tmp/x"}})


def test_null_counts_as_absent_for_kinds() -> None:
    grammar = tool_grammar(NESTED, ToolTable(mcp_name="t", args={"urls": "url"}))
    args = effective_args(grammar, {"opts": {}, "urls": [None, "https://a.example/"]})
    assert kinded_values(grammar, args) == [("urls", "url", "https://a.example/")]


def test_not_an_object() -> None:
    grammar = tool_grammar(NESTED, None)
    with pytest.raises(ArgumentError, match="expected an object, found an array"):
        effective_args(grammar, [])


def test_opaque_tools_take_any_bounded_object_and_fill_nothing() -> None:
    grammar = tool_grammar({"type": "object", "not": {}}, None)
    assert grammar.root is None and grammar.opaque is not None and "not" in grammar.opaque
    assert effective_args(grammar, {"anything": [1, {"b": None}]}) == {"anything": [1, {"b": None}]}
    with pytest.raises(ArgumentError, match="65536 bytes"):
        effective_args(grammar, {"a": "x" * 65536})
    owner = tool_grammar(PYDANTIC_FETCH, ToolTable(mcp_name="fetch", opaque=True))
    assert owner.root is None and owner.opaque is not None
    assert effective_args(owner, {"url": 1}) == {"url": 1}


@pytest.mark.parametrize(("table", "fragment"), [
    (ToolTable(mcp_name="t", args={"nope": "path"}), "does not have"),
    (ToolTable(mcp_name="t", args={"opts.nope": "path"}), "does not have"),
    (ToolTable(mcp_name="t", args={"n": "path"}), "expected a string"),
    (ToolTable(mcp_name="t", args={"opts": "path"}), "expected a string"),
    (ToolTable(mcp_name="t", args={"list.p": "path"}), "inside an array of objects"),
    (ToolTable(mcp_name="t", args={"opts.path": "text"},
               egress=Egress(word="arg", argument="opts.path")), "url or host"),
    (ToolTable(mcp_name="t", args={"urls": "url"},
               egress=Egress(word="arg", argument="urls")), "url or host string"),
    (ToolTable(mcp_name="t", args={"opts.path": "url"},
               egress=Egress(word="arg", argument="opts.path")), "found it optional"),
    (ToolTable(mcp_name="t", egress=Egress(word="arg", argument="zzz")), "does not have"),
])
def test_s13(table: ToolTable, fragment: str) -> None:
    problems = kind_problems(tool_grammar(NESTED, table), table)
    assert len(problems) == 1 and fragment in problems[0], problems
    assert "expected" in problems[0]


def test_s13_holds_for_a_required_or_defaulted_url() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {
        "u": {"type": "string", "default": "https://a.example/"}, "h": {"type": "string"}},
        "required": ["h"]}
    for name, kind in (("u", "url"), ("h", "host")):
        table = ToolTable(mcp_name="t", args={name: kind},  # type: ignore[dict-item]
                          egress=Egress(word="arg", argument=name))
        assert kind_problems(tool_grammar(schema, table), table) == []


def test_s13_kinds_on_an_opaque_tool() -> None:
    table = ToolTable(mcp_name="t", args={"a": "path"})
    problems = kind_problems(tool_grammar({"type": "object", "not": {}}, table), table)
    assert problems and "opaque" in problems[0]
