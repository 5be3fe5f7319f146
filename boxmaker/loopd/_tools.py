"""The tools loopd offers to the model: JSON schemas and descriptions (06-loopd).

Read from the tool catalogue (`boxmaker.proto.tools`): each available tool's
description and argument grammar, as OpenAI's function shape.  The production
registry has the tools the catalogue offers by default and those offered when
`[loop] tools` names them (`run_command`); the test registry adds
the ones offered only when `[loop] tools` names them (`echo`, which exists so
that tests and benchmarks can drive the whole decision path; it is never
offered to a production model).  A tool not yet available is in neither.

Tool-source tools (12-tool-sources "loopd"): `[loop] tools` may also name
`mcp.<id>.*` (every offered tool of that server) and `mcp.<id>.<local>`; they
are not checked at load (the server may be unpinned).  Each turn, the items of
broker.sock's `tools` answer that those entries name are offered after the
built-ins, under their model names (`mcp_offer`), and the model's calls are
mapped back by the items (`McpOffer.wire_name`).  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import attrs

from ..proto.tools import CATALOGUE
from ..proto.wire import ToolsAnswer

PRODUCTION_TOOLS: dict[str, dict[str, Any]] = {
    tool.name: tool.model_schema() for tool in CATALOGUE if tool.offer != "test"}

TEST_TOOLS: dict[str, dict[str, Any]] = {
    tool.name: tool.model_schema() for tool in CATALOGUE if tool.offer == "test"}

KNOWN_TOOLS = frozenset(PRODUCTION_TOOLS) | frozenset(TEST_TOOLS)

DEFAULT_TOOLS: tuple[str, ...] = CATALOGUE.default_offer
"""`[loop] tools` when loopd.toml does not set it."""


def tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """The schemas for the configured built-in tool names, in the configured order.

    An unknown name is our configuration's fault and is refused by the config
    loader before this is called.
    """
    out = []
    for name in names:
        if mcp_entry(name) is not None:
            continue  # a tool source's: offered per turn from brokerd's `tools` answer
        schema = PRODUCTION_TOOLS.get(name) or TEST_TOOLS.get(name)
        if schema is None:
            raise ValueError(f"unknown tool {name!r} in [loop] tools")
        out.append(schema)
    return out


# -- tool-source tools (12-tool-sources "loopd (06-loopd)") ----------------------------

MCP_ALL: Final = "*"
_MCP_NAME: Final = re.compile(r"mcp\.([a-z][a-z0-9-]{0,30})\.(\*|[A-Za-z0-9_-]{1,64})")
"""12 "Tool names": `mcp.<server id>.<local name>`, or `*` for every tool of the
server (the grammar of `proto.mcp`, spelled here so that loopd does not load the
MCP client to read its configuration)."""


def mcp_entry(name: str) -> tuple[str, str] | None:
    """A `[loop] tools` entry naming tool-source tools: `mcp.<id>.*` -> (id, "*"),
    `mcp.<id>.<local>` -> (id, local); None when the name is not of either form."""
    match = _MCP_NAME.fullmatch(name)
    return (match.group(1), match.group(2)) if match is not None else None


def _split(name: str) -> tuple[str, str] | None:
    """boxmaker's name of an offered tool -> (id, local), or None."""
    entry = mcp_entry(name)
    return entry if entry is not None and entry[1] != MCP_ALL else None


@attrs.frozen(kw_only=True)
class OfferedMcpTool:
    """One tool-source tool offered in a turn: boxmaker's name and the model's."""

    name: str
    model_name: str
    description: str


@attrs.frozen(kw_only=True)
class McpOffer:
    """The tool-source tools of one turn: their schemas (after the built-ins'), and
    the map back from the model's names to boxmaker's."""

    tools: tuple[OfferedMcpTool, ...] = ()
    schemas: tuple[dict[str, Any], ...] = ()
    digest: str | None = None
    """The `tools` answer's digest (None: no answer was asked for or read)."""

    def wire_name(self, model_name: str) -> str:
        """boxmaker's name of the model's call: mapped by the items; a name that is
        not among them is sent to brokerd as it is (denied `unknown_tool` there)."""
        for tool in self.tools:
            if tool.model_name == model_name:
                return tool.name
        return model_name


NO_MCP_OFFER: Final = McpOffer()


def names_mcp(configured: Sequence[str]) -> bool:
    """Whether `[loop] tools` names any tool-source tool (then a turn asks brokerd)."""
    return any(mcp_entry(name) is not None for name in configured)


def mcp_offer(configured: Sequence[str], answer: ToolsAnswer) -> McpOffer:
    """The items of a `tools` answer that `[loop] tools` names, in the answer's order
    (servers in id order, tools in local-name order), as the model sees them."""
    entries = [entry for entry in map(mcp_entry, configured) if entry is not None]
    tools: list[OfferedMcpTool] = []
    schemas: list[dict[str, Any]] = []
    for item in answer.items:
        split = _split(item.name)
        if split is None or not any(server == split[0] and local in (MCP_ALL, split[1])
                                    for server, local in entries):
            continue
        tools.append(OfferedMcpTool(name=item.name, model_name=item.model_name,
                                    description=item.description))
        schemas.append({"type": "function",
                        "function": {"name": item.model_name, "description": item.description,
                                     "parameters": item.parameters}})
    return McpOffer(tools=tuple(tools), schemas=tuple(schemas), digest=answer.digest)
