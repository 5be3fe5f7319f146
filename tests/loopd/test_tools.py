"""The tool registry: schemas match the argument grammar's required fields; the
tool-source tools of a turn picked from brokerd's `tools` answer and mapped back."""

from __future__ import annotations

import pytest

from boxmaker.loopd._tools import (
    DEFAULT_TOOLS,
    NO_MCP_OFFER,
    PRODUCTION_TOOLS,
    TEST_TOOLS,
    mcp_entry,
    mcp_offer,
    names_mcp,
    tool_schemas,
)
from boxmaker.proto.wire import ToolItem, ToolsAnswer


def test_production_registry_has_the_four_tools_and_run_command() -> None:
    assert set(PRODUCTION_TOOLS) == {
        "read_file", "list_dir", "write_file", "http_fetch", "run_command"}
    assert "echo" not in PRODUCTION_TOOLS and "echo" in TEST_TOOLS
    # run_command only when [loop] tools names it
    assert DEFAULT_TOOLS == ("read_file", "list_dir", "write_file", "http_fetch")


@pytest.mark.parametrize("name", [*PRODUCTION_TOOLS, *TEST_TOOLS])
def test_schema_shape(name: str) -> None:
    (schema,) = tool_schemas([name])
    function = schema["function"]
    assert schema["type"] == "function" and function["name"] == name
    assert function["description"]
    parameters = function["parameters"]
    assert parameters["additionalProperties"] is False
    assert set(parameters["required"]) <= set(parameters["properties"])


def test_unknown_tool_refused() -> None:
    with pytest.raises(ValueError, match="unknown tool"):
        tool_schemas(["rm_rf"])


# -- tool-source tools: the pure mapping (12-tool-sources "loopd") -----------------------

def item(name: str, model: str, description: str = "d") -> ToolItem:
    return ToolItem(name=name, model_name=model, description=description,
                    parameters={"type": "object"}, opaque=False)


ANSWER = ToolsAnswer(digest="ab" * 32, items=[
    item("mcp.git.git_log", "mcp__git__git_log"),
    item("mcp.git.git_status", "mcp__git__git_status"),
    item("mcp.time.get_current_time", "mcp__time__get_current_time", "Now."),
])


@pytest.mark.parametrize(("name", "entry"), [
    ("mcp.git.*", ("git", "*")),
    ("mcp.git.git_log", ("git", "git_log")),
    ("mcp.my-srv.Tool_1", ("my-srv", "Tool_1")),
    ("mcp.git", None), ("mcp.git.", None), ("mcp.Git.x", None), ("mcp.git.a.b", None),
    ("mcp.git.**", None), ("mcp__git__git_log", None), ("read_file", None),
])
def test_mcp_entries_of_loop_tools(name: str, entry: tuple[str, str] | None) -> None:
    assert mcp_entry(name) == entry


def test_the_offer_keeps_what_loop_tools_names_in_the_answers_order() -> None:
    offer = mcp_offer(["read_file", "mcp.time.*", "mcp.git.git_status", "mcp.gone.*"], ANSWER)
    assert [t.name for t in offer.tools] == ["mcp.git.git_status", "mcp.time.get_current_time"]
    assert offer.digest == ANSWER.digest
    assert offer.schemas[1] == {"type": "function", "function": {
        "name": "mcp__time__get_current_time", "description": "Now.",
        "parameters": {"type": "object"}}}
    assert mcp_offer(["read_file"], ANSWER).tools == ()


def test_calls_are_mapped_back_by_the_items() -> None:
    offer = mcp_offer(["mcp.git.*"], ANSWER)
    assert offer.wire_name("mcp__git__git_log") == "mcp.git.git_log"
    # not offered this turn (or made up): sent as it is, brokerd denies unknown_tool
    assert offer.wire_name("mcp__time__get_current_time") == "mcp__time__get_current_time"
    assert offer.wire_name("read_file") == "read_file"
    assert NO_MCP_OFFER.wire_name("mcp__git__git_log") == "mcp__git__git_log"


def test_built_in_schemas_skip_the_mcp_entries() -> None:
    assert names_mcp(["read_file", "mcp.git.*"]) and not names_mcp(["read_file"])
    assert [s["function"]["name"] for s in tool_schemas(["read_file", "mcp.git.*"])] == [
        "read_file"]
