"""The `mcp_probe` answer's tool list (12 "Pinning" step 1), from a live list.

For every tool of the live list or the current pin: its name, hash and raw
object, its status against the pin (same, changed with a field-level diff,
added, removed), whether it would be opaque and why, disabled and by which
rule, and the kinds a probe suggests; with the digest the live list would be
pinned under.  `invalidates` needs the grants and is the policy layer's.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._decl import ServerDecl
from ._drift import compare_tools
from ._pin import Pin, PinnedProtocol, PinnedTool, ServerInfo, make_pin, pin_source
from ._tool_view import suggested_kinds, tool_verdicts


def probe_tools(decl: ServerDecl, *, protocol: PinnedProtocol, live: Sequence[PinnedTool],
                server_info: ServerInfo | None, instructions: str | None,
                current: Pin | None, pinned_at: str, by: int
                ) -> tuple[Pin, list[dict[str, Any]]]:
    """The pin the live list would make, and the answer's `tools` items (by name)."""
    candidate = make_pin(server=decl.id, protocol=protocol, source=pin_source(decl),
                         tools=live, server_info=server_info, instructions=instructions,
                         pinned_at=pinned_at, by=by)
    verdicts = tool_verdicts(decl, candidate)
    by_name = {tool.name: tool for tool in live}
    old = {tool.name: tool for tool in current.tools} if current is not None else {}
    items: list[dict[str, Any]] = []
    for status in compare_tools(current.tools if current is not None else None, live):
        tool = by_name.get(status.name) or old[status.name]
        verdict = verdicts.get(status.name)
        grammar = verdict.grammar if verdict is not None else None
        items.append({
            "name": status.name, "sha256": tool.sha256, "raw": dict(tool.raw),
            "status": status.status,
            "diff": [{"field": c.field, "change": c.change} for c in status.diff],
            "opaque": grammar.opaque if grammar is not None else None,
            "disabled": verdict.rule if verdict is not None and verdict.status == "disabled"
            else None,
            "suggested_kinds": suggested_kinds(grammar, tool.raw.get("inputSchema"))
            if grammar is not None else {},
        })
    return candidate, items
