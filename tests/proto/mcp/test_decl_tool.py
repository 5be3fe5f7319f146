"""The per-tool tables of a declaration (S12) and host patterns (S7), directly."""

from __future__ import annotations

import pytest

from boxmaker.proto.mcp._decl_tool import (
    Egress,
    ToolTable,
    check_host_pattern,
    check_tool_tables,
    default_egress,
    is_property_path,
    q,
)


@pytest.mark.parametrize("text", ["example.com", "*.example.com", "a.example:8443",
                                  "*.b.example:80"])
def test_host_patterns(text: str) -> None:
    assert check_host_pattern(text) is None


@pytest.mark.parametrize(("text", "fragment"), [
    ("10.0.0.1", "number"), ("[::1]:443", "IP literal"), ("*", "two labels"),
    ("a.example:", "port"), ("a.example:065", "port"), (3, "not a string"),
    ("**.example.com", "label"),
])
def test_not_host_patterns(text: object, fragment: str) -> None:
    problem = check_host_pattern(text)
    assert problem is not None and fragment in problem


def test_default_egress_follows_hosts() -> None:
    assert default_egress(None, has_hosts=True) == Egress(word="server")
    assert default_egress(None, has_hosts=False) == Egress(word="none")
    table = ToolTable(mcp_name="x", egress=Egress(word="arg", argument="url"))
    assert default_egress(table, has_hosts=False).text == "arg:url"


def test_property_paths() -> None:
    assert is_property_path("a") and is_property_path("options.path_1")
    assert not is_property_path("") and not is_property_path("a.") and not is_property_path("a b")
    assert not is_property_path("a" * 65)


def test_quoting_is_ascii_and_bounded() -> None:
    assert q("\u202e") == '"\\u202e"'
    assert q(True) == "true" and q([1]) == "(an array)" and q({}) == "(a table)"
    assert len(q("x" * 1000)) == 200


def test_a_valid_table_and_two_problems_at_once() -> None:
    tables, problems = check_tool_tables(
        {"fetch": {"args": {"url": "url"}, "egress": "arg:url", "opaque": True}},
        has_hosts=False)
    assert problems == []
    assert tables["fetch"] == ToolTable(mcp_name="fetch", args={"url": "url"},
                                        egress=Egress(word="arg", argument="url"), opaque=True)
    tables, problems = check_tool_tables({"x": {"alias": 1, "egress": 2}}, has_hosts=False)
    assert tables == {} and len(problems) == 2


def test_tool_names_are_bounded() -> None:
    _, problems = check_tool_tables({"a" * 129: {}}, has_hosts=False)
    assert problems == [f'tool.{q("a" * 129)}: expected an MCP tool name of 1..128 '
                        "characters, found 129"]
