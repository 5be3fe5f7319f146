"""The tools loopd offers to the model: JSON schemas and descriptions (06-loopd).

Read from the tool catalogue (`boxmaker.proto.tools`): each available tool's
description and argument grammar, as OpenAI's function shape.  The production
registry has the tools the catalogue offers by default and those offered when
`[loop] tools` names them (`run_command`); the test registry adds
the ones offered only when `[loop] tools` names them (`echo`, which exists so
that tests and benchmarks can drive the whole decision path; it is never
offered to a production model).  A tool not yet available is in neither.
"""

from __future__ import annotations

from typing import Any

from ..proto.tools import CATALOGUE

PRODUCTION_TOOLS: dict[str, dict[str, Any]] = {
    tool.name: tool.model_schema() for tool in CATALOGUE if tool.offer != "test"}

TEST_TOOLS: dict[str, dict[str, Any]] = {
    tool.name: tool.model_schema() for tool in CATALOGUE if tool.offer == "test"}

KNOWN_TOOLS = frozenset(PRODUCTION_TOOLS) | frozenset(TEST_TOOLS)

DEFAULT_TOOLS: tuple[str, ...] = CATALOGUE.default_offer
"""`[loop] tools` when loopd.toml does not set it."""


def tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """The schemas for the configured tool names, in the configured order.

    An unknown name is our configuration's fault and is refused by the config
    loader before this is called.
    """
    out = []
    for name in names:
        schema = PRODUCTION_TOOLS.get(name) or TEST_TOOLS.get(name)
        if schema is None:
            raise ValueError(f"unknown tool {name!r} in [loop] tools")
        out.append(schema)
    return out
