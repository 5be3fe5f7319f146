"""Tool names: mcp.<id>.<local>, mcp__<id>__<local>, aliases, S16."""

from __future__ import annotations

import pytest

from boxmaker.proto.mcp._names import (
    is_server_id,
    local_name,
    model_name,
    name_tools,
    split_model_name,
    split_wire_name,
    wire_name,
)


def test_the_names_and_their_splits() -> None:
    assert wire_name("git", "git_log") == "mcp.git.git_log"
    assert model_name("git", "git_log") == "mcp__git__git_log"
    assert split_wire_name("mcp.git.git_log") == ("git", "git_log")
    assert split_model_name("mcp__my-git__a__b") == ("my-git", "a__b")
    assert split_wire_name("mcp.git.a.b") is None  # a local name has no dot
    for bad in ("mcp.git", "mcp..x", "mcp.Git.x", "mcpx.git.x", "read_file", "mcp.git."):
        assert split_wire_name(bad) is None, bad
    assert split_model_name("mcp__git") is None and split_model_name("mcp__G__x") is None


@pytest.mark.parametrize(("text", "ok"), [
    ("git", True), ("a", True), ("a-1", True), ("a" * 31, True), ("a" * 32, False),
    ("1a", False), ("a_b", False), ("", False), ("A", False)])
def test_server_ids(text: str, ok: bool) -> None:
    assert is_server_id(text) is ok


def test_local_names() -> None:
    assert local_name("git_log", None) == "git_log"
    assert local_name("admin.tools.list", None) is None
    assert local_name("admin.tools.list", "admin_tools_list") == "admin_tools_list"
    assert local_name("x", "y") == "y"


def test_a_tool_without_a_name_is_not_offered_and_not_s16() -> None:
    named = name_tools("git", ["a.b", "ok"], {})
    assert named["a.b"].local is None and named["a.b"].rule is None
    assert "no alias" in (named["a.b"].problem or "")
    assert named["ok"].local == "ok"


def test_two_tools_of_one_local_name_are_both_disabled() -> None:
    named = name_tools("git", ["a.b", "c", "d"], {"a.b": "c"})
    assert named["a.b"].rule == "S16" and named["c"].rule == "S16"
    assert named["d"].local == "d"
    assert "expected one tool" in (named["a.b"].problem or "")


def test_an_alias_equal_to_another_tools_mcp_name_disables_both() -> None:
    named = name_tools("git", ["x", "z"], {"x": "y", "z": "x"})
    assert named["x"].rule == "S16" and named["z"].rule == "S16"
    named = name_tools("git", ["z", "x"], {"x": "y", "z": "x"})
    assert named["x"].rule == "S16" and named["z"].rule == "S16"


def test_the_model_name_is_at_most_64() -> None:
    server = "s" * 31
    fits = "t" * (64 - len("mcp__") - 31 - 2)
    named = name_tools(server, [fits, fits + "u"], {})
    assert named[fits].local == fits
    assert named[fits + "u"].rule == "S16"
    assert "expected at most 64 characters, found 65" in (named[fits + "u"].problem or "")
