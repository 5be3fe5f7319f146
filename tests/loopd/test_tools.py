"""The tool registry: schemas match the argument grammar's required fields."""

from __future__ import annotations

import pytest

from boxmaker.loopd._tools import DEFAULT_TOOLS, PRODUCTION_TOOLS, TEST_TOOLS, tool_schemas


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
