"""Dormant grants (12-tool-sources "Grants for tool-source tools"): pure.

A grant for an `mcp.*` tool is valid without the pin; against the tool
registry it is **dormant** (it matches nothing) when:

- its server is not declared by a valid source set, or is unpinned, or the
  tool is not offered (not in the pin, left out by `tools`, unnamed):
  `rule` None;
- the tool is disabled by S13, S16 or S17: `rule` that rule;
- it is an `allow`/`ask` grant failing G11..G14 against the pinned tool:
  `rule` the first failing rule;
- a `deny` grant for the tool fails G11..G14: that disables the tool (what it
  denied stays denied: every call is `unknown_tool`), so every grant naming it
  is dormant, `rule` the deny grant's.

`judge_mcp` decides by the same rules (`deny_disabling`).  A pin change thus
only ever makes grants dormant, never the grant set invalid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, cast

import attrs

from ..proto._escape import escape_line
from ..proto.mcp import ToolVerdict, split_wire_name
from ._mcp_grants import is_mcp_tool
from ._mcp_verdict import McpRegistry, RegisteredServer, deny_disabling, pin_problems
from ._model import Grant, GrantSet

DormantRule = Literal["G11", "G12", "G13", "G14", "S13", "S16", "S17"]
DORMANT_RULES: Final = frozenset({"G11", "G12", "G13", "G14", "S13", "S16", "S17"})


def _rule(rule: str | None) -> DormantRule | None:
    return cast(DormantRule, rule) if rule in DORMANT_RULES else None


@attrs.frozen(kw_only=True)
class DormantGrant:
    """`{"file", "index", "grant", "rule", "reason"}` of the grants report."""

    file: str
    index: int
    grant: str
    rule: DormantRule | None = attrs.field(converter=_rule)
    reason: str


def _offered(server: RegisteredServer, local: str) -> ToolVerdict | None:
    for verdict in server.verdicts.values():
        if verdict.local == local and verdict.status == "offered":
            return verdict
    return None


def _absent(server: RegisteredServer, local: str) -> tuple[str | None, str]:
    for verdict in server.verdicts.values():
        if local in (verdict.local, verdict.mcp_name):
            rule = verdict.rule if verdict.status == "disabled" else None
            return rule, f"the tool is {verdict.status}: {verdict.message or 'not offered'}"
    return None, "the pin has no tool of that name"


def _tool_dormancy(tool: str, grants: Sequence[Grant], registry: McpRegistry
                   ) -> list[DormantGrant]:
    def each(rule: str | None, reason: str, only: Sequence[Grant] = grants
             ) -> list[DormantGrant]:
        return [DormantGrant(file=g.file, index=g.index, grant=g.id, rule=rule, reason=reason)
                for g in only]

    split = split_wire_name(tool)
    if split is None:  # pragma: no cover - G4 refused it
        return each(None, "not an MCP tool name")
    if not registry.valid:
        return each(None, "the tool-source set is invalid (bxctl mcp check lists its problems)")
    server = registry.servers.get(split[0])
    if server is None:
        return each(None, f"no source declares the MCP server {split[0]}")
    if server.pin is None:
        return each(None, f"the MCP server {split[0]} is unpinned ({server.unpinned or 'none'})")
    offered = _offered(server, split[1])
    if offered is None:
        rule, reason = _absent(server, split[1])
        return each(rule, reason)
    disabling = deny_disabling(grants, offered)
    if disabling is not None:
        deny, rule, message = disabling
        return each(rule, f"the deny grant {deny.id} does not fit the pinned tool ({message}); "
                          "it disables the tool")
    out: list[DormantGrant] = []
    for grant in grants:
        problems = pin_problems(grant, offered)
        if problems:
            out.append(DormantGrant(file=grant.file, index=grant.index, grant=grant.id,
                                    rule=problems[0][0],
                                    reason="; ".join(message for _, message in problems)))
    return out


def dormant_grants(state: GrantSet, registry: McpRegistry) -> list[DormantGrant]:
    """Every grant of the set that matches nothing against the registry, in file order."""
    out: list[DormantGrant] = []
    for tool, grants in state.by_tool.items():
        if is_mcp_tool(tool):
            out.extend(_tool_dormancy(tool, grants, registry))
    out.sort(key=lambda d: (d.file.encode("utf-8", "surrogateescape"), d.index))
    return out


def dormant_json(items: Sequence[DormantGrant]) -> list[dict[str, Any]]:
    return [{"file": d.file, "index": d.index, "grant": d.grant, "rule": d.rule,
             "reason": d.reason} for d in items]


def dormant_lines(items: Sequence[DormantGrant]) -> list[str]:
    """`bxctl grants check`: one escaped line per dormant grant."""
    return [escape_line(f"dormant {d.file} grant {d.index} ({d.grant}): "
                        f"{d.rule + ' ' if d.rule else ''}{d.reason}") for d in items]
