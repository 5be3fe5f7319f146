"""Grants for MCP tools (12-tool-sources "Grants for tool-source tools"): G4 for
`mcp.<id>.<local>` names, G2 for their fields, G10 for `args`.  Pure.

G11..G14 need the pin: they are checked when deciding (`_mcp_verdict.py`), where
a grant that fails them is dormant (it matches nothing), never invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..proto.mcp import g10_problems, split_wire_name
from ._model import Rule

MCP_FIELDS: Final = frozenset({"id", "tool", "mode", "label", "untrusted", "max_label",
                               "when_untrusted", "note", "args"})
MCP_DENY_FIELDS: Final = frozenset({"id", "tool", "mode", "args", "note"})


def is_mcp_tool(tool: object) -> bool:
    """`mcp.<server id>.<local name>` of the grammars (G4 amended)."""
    return isinstance(tool, str) and tool.startswith("mcp.") and split_wire_name(tool) is not None


def mcp_fields(table: Mapping[str, Any], mode: str | None,
               report: Callable[[Rule, str], None]) -> set[str]:
    """G2 for an `mcp.*` grant: the fields to check further."""
    fields = MCP_DENY_FIELDS if mode == "deny" else MCP_FIELDS
    out: set[str] = set()
    for name in table:
        if name in ("id", "tool", "mode"):
            continue
        if name not in fields:
            where = "a deny grant for an MCP tool" if mode == "deny" else "an MCP tool's grant"
            report("G2", f"{name} is not a field of {where} "
                         f"(only {', '.join(sorted(fields - {'id', 'tool', 'mode'}))}); "
                         "constraints go inside args")
            continue
        out.add(name)
    return out


def mcp_args(table: Mapping[str, Any], report: Callable[[Rule, str], None]
             ) -> dict[str, dict[str, Any]]:
    """G10: `args` a table of tables of constraint keys (absent: none)."""
    if "args" not in table:
        return {}
    problems = g10_problems(table["args"])
    for problem in problems:
        report("G10", problem)
    if problems:
        return {}
    return {name: dict(value) for name, value in table["args"].items()}
