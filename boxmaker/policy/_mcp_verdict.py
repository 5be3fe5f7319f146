"""Deciding an `mcp.<id>.<local>` call (12-tool-sources "Deciding"): pure.

The inputs gain the **tool registry** (`McpRegistry`): each declared server's
state (pinned with its digest, or unpinned and why), its tools' verdicts
(offered with their grammar, or disabled and why) and its label, as of the
decision.  The steps, marked in the code:

- D0 (as built) an invalid grant set: `grants_invalid`;
- D1 the source set invalid: `sources_invalid`; a name not of the form or a
  server not declared: `unknown_tool`; D1b unpinned: `source_unpinned` with the
  reason; a tool that is not offered: `unknown_tool` with why;
- D2 the arguments against the profiled schema and the kinds, defaults filled
  (the effective arguments); D2b every `path`/`write_path` value against the
  protected paths;
- D1b also: a `deny` grant failing G11..G14 disables its tool (`unknown_tool`,
  what it denied stays denied);
- D3 a grant matches when its tool is the call's, it is not dormant (G11..G14
  against the pin) and every constraint holds on the effective arguments;
- D4..D7 as for the built-ins; D6's winner: the strictest effective mode, then
  the grant constraining more arguments, then the smallest id;
- D8 the label is the highest of the server's and every applicable matching
  non-deny grant's; untrusted is the server's or any such grant's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from ..proto._taint import LABELS, Label, Taint
from ..proto.mcp import (
    ArgumentError,
    ServerDecl,
    ToolVerdict,
    argument_value,
    constraint_holds,
    effective_args,
    grant_problems,
    kinded_values,
    split_wire_name,
)
from ._decision import ProtectedPaths
from ._model import STRICTNESS, Grant, GrantSet, GrantState, InvalidGrantSet, Mode
from ._verdict import Match, Verdict

_RANK: Final[dict[str, int]] = {label: rank for rank, label in enumerate(LABELS)}


@attrs.frozen(kw_only=True)
class RegisteredServer:
    decl: ServerDecl
    pin: str | None
    """The pin's digest, or None when the server is unpinned."""
    unpinned: str | None
    """Why it is unpinned (none, unpinned, drifted, file_missing, ...)."""
    verdicts: Mapping[str, ToolVerdict] = attrs.field(factory=dict)
    """The pinned tools by MCP name (empty while unpinned)."""
    dormancy: dict[tuple[int, int], tuple[Grant, ToolVerdict, bool]] = attrs.field(
        factory=dict, eq=False, repr=False)
    """G11..G14's outcome per (grant, pinned tool), computed once: both are immutable and
    the entry holds them, so an id is never another object's while it is kept."""


DORMANCY_MAX = 262_144
"""Entries kept per server before the memo starts again (grant sets reloaded often)."""


@attrs.frozen(kw_only=True)
class McpRegistry:
    """The tool sources as of one decision."""

    valid: bool
    digest: str
    servers: Mapping[str, RegisteredServer] = attrs.field(factory=dict)


NO_SOURCES: Final = McpRegistry(valid=True, digest="", servers={})


@attrs.frozen(kw_only=True)
class McpVerdict:
    verdict: Verdict
    effective: dict[str, Any] | None
    """The effective arguments (None before D2 passed)."""
    pin: str | None
    """The server's pin digest (None when it has none)."""


def _early(code: Any, detail: str, *, effective: dict[str, Any] | None = None,
           pin: str | None = None) -> McpVerdict:
    return McpVerdict(verdict=Verdict(code, None, None, detail, [], [], None, None, None),
                      effective=effective, pin=pin)


def offered_tool(server: RegisteredServer, local: str) -> ToolVerdict | None:
    for verdict in server.verdicts.values():
        if verdict.local == local and verdict.status == "offered":
            return verdict
    return None


def _why_not_offered(server: RegisteredServer, local: str) -> str:
    for verdict in server.verdicts.values():
        if local in (verdict.local, verdict.mcp_name):
            rule = f" ({verdict.rule})" if verdict.rule else ""
            return f"it is {verdict.status}{rule}: {verdict.message or 'not offered'}"
    return "the pin has no tool of that name"


def pin_problems(grant: Grant, tool: ToolVerdict) -> list[tuple[str, str]]:
    """G11..G14 of one grant against the offered tool (empty: it fits)."""
    if tool.grammar is None:  # pragma: no cover - an offered tool has its grammar
        return [("G11", "the pinned tool has no schema")]
    return list(grant_problems(tool.grammar, mode=grant.mode,
                               when_untrusted=grant.when_untrusted, args=grant.args or {}))


def deny_disabling(grants: Sequence[Grant], tool: ToolVerdict
                   ) -> tuple[Grant, str, str] | None:
    """The first `deny` grant of the tool's failing G11..G14, with its rule and message:
    it disables the tool (12 "Pin-dependent checks": what it denied stays denied)."""
    for grant in grants:
        if grant.mode == "deny":
            problems = pin_problems(grant, tool)
            if problems:
                return grant, problems[0][0], problems[0][1]
    return None


def _dormant(grant: Grant, tool: ToolVerdict, server: RegisteredServer) -> bool:
    """G11..G14 against the pin: a failing allow/ask grant matches nothing (memoized)."""
    key = (id(grant), id(tool))
    known = server.dormancy.get(key)
    if known is not None and known[0] is grant and known[1] is tool:
        return known[2]
    dormant = bool(pin_problems(grant, tool))
    if len(server.dormancy) >= DORMANCY_MAX:
        server.dormancy.clear()
    server.dormancy[key] = (grant, tool, dormant)
    return dormant


def _holds(grant: Grant, tool: ToolVerdict, effective: Mapping[str, Any]) -> bool:
    assert tool.grammar is not None
    kinds = tool.grammar.kinds
    for name, table in sorted((grant.args or {}).items()):
        value = argument_value(effective, name)
        if constraint_holds(table, value, kinds.get(name, "text"),
                            deny=grant.mode == "deny") is None:
            return False
    return True


def judge_mcp(tool: str, raw_args: Mapping[str, Any], taint: Taint, grants: GrantState,
              protected: ProtectedPaths, registry: McpRegistry) -> McpVerdict:
    """D0..D8 for one `mcp.*` call."""
    # D0
    if isinstance(grants, InvalidGrantSet):
        return _early("grants_invalid", "")
    # D1
    if not registry.valid:
        return _early("sources_invalid", "the tool-source set is invalid (bxctl mcp check "
                                         "lists its problems); every mcp.* call is denied")
    split = split_wire_name(tool)
    server = registry.servers.get(split[0]) if split is not None else None
    if split is None or server is None:
        return _early("unknown_tool", f"unknown tool {tool!r}: no declared MCP server has it")
    # D1b
    if server.pin is None:
        return _early("source_unpinned", f"the MCP server {split[0]} is unpinned "
                                         f"({server.unpinned or 'none'}); bxctl mcp pin "
                                         f"{split[0]} reviews and pins it")
    offered = offered_tool(server, split[1])
    if offered is None or offered.grammar is None:
        return _early("unknown_tool", f"{tool} is not offered: "
                                      f"{_why_not_offered(server, split[1])}", pin=server.pin)
    candidates = grants.by_tool.get(tool, ()) if isinstance(grants, GrantSet) else ()
    disabling = deny_disabling(candidates, offered)
    if disabling is not None:
        return _early("unknown_tool", f"{tool} is not offered: it is disabled ({disabling[1]}) "
                                      f"by the deny grant {disabling[0].id}, which does not "
                                      f"fit the pinned tool: {disabling[2]}", pin=server.pin)
    # D2
    try:
        effective = effective_args(offered.grammar, dict(raw_args))
    except ArgumentError as exc:
        return _early("bad_args", f"bad arguments for {tool}: {exc}", pin=server.pin)
    # D2b
    for name, kind, value in kinded_values(offered.grammar, effective):
        if kind in ("path", "write_path"):
            base = protected.covering(value)
            if base is not None:
                return _early("protected", f"{name} {value} is one of boxmaker's protected "
                                           f"paths (under {base}); no grant can cover it",
                              effective=effective, pin=server.pin)
    # D3
    matched: list[Match] = [
        (grant, None, (len(grant.args or {}),)) for grant in candidates
        if not _dormant(grant, offered, server)
        and _holds(grant, offered, effective)]
    if not matched:
        return McpVerdict(verdict=Verdict("no_grant", None, None, f"no grant covers {tool}",
                                          [], [], None, None, None),
                          effective=effective, pin=server.pin)
    # D4..D8
    rank = _RANK[taint.label]
    applicable: list[Match] = []
    label: Label = server.decl.label
    untrusted = server.decl.untrusted
    winner: Match | None = None
    top: tuple[int, tuple[int, ...]] = (-1, ())
    for m in matched:
        grant = m[0]
        if grant.mode != "deny":
            if rank > _RANK[grant.max_label]:
                continue
            label = grant.label if _RANK[grant.label] > _RANK[label] else label
            untrusted = untrusted or grant.untrusted
        applicable.append(m)
        key = (STRICTNESS[grant.when_untrusted if taint.untrusted else grant.mode], m[2])
        if winner is None or key > top or (key == top and grant.id < winner[0].id):
            winner, top = m, key
    if winner is None:
        return McpVerdict(verdict=Verdict("taint", None, None, "", matched, applicable, None,
                                          None, None), effective=effective, pin=server.pin)
    mode: Mode = winner[0].when_untrusted if taint.untrusted else winner[0].mode
    return McpVerdict(verdict=Verdict("denied_by_grant" if mode == "deny" else None, mode,
                                      None, "", matched, applicable, winner, label, untrusted),
                      effective=effective, pin=server.pin)
