"""An MCP probe as rows (12-tool-sources "Pinning" step 2): what `bxctl mcp pin` prints
and the approval page's pin page shows, the same rows in both.

Every tool whole, never truncated: each field the server sent escaped
(`proto._escape`, as approvals are), annotations as "the server says" (claims,
not facts), the diff against the current pin and `invalidates`.  A row is
``(head, value)``: `head` is boxmaker's own words (with escaped names in it),
`value` an escaped field shown behind a gutter, or None for a line of
boxmaker's alone.  Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from .proto._escape import escape_line
from .proto._json import dumps
from .proto.wire import McpProbeAnswer, ProbedTool

Row = tuple[str, str | None]

HEAD = "    "
STATUSES = ("added", "removed", "changed", "same")
"""A probed tool's status against the current pin, in the order counted."""
MARK = dict(zip(STATUSES, "+-~ ", strict=True))
_CLAIMS = (("readOnlyHint", "read-only", "not read-only"),
           ("destructiveHint", "destructive", "not destructive"),
           ("idempotentHint", "idempotent", "not idempotent"),
           ("openWorldHint", "open world", "closed world"))


def claims(annotations: Any) -> str | None:
    """``read-only, not destructive`` from MCP's hint annotations."""
    if not isinstance(annotations, dict):
        return None
    words = [yes if annotations[key] else no for key, yes, no in _CLAIMS
             if isinstance(annotations.get(key), bool)]
    return ", ".join(words) if words else None


def tool_rows(tool: ProbedTool) -> list[Row]:
    """One probed tool, whole: every field the server sent, escaped."""
    raw = tool.raw
    status = "" if tool.status == "same" else f"  ({tool.status})"
    rows: list[Row] = [(f"{MARK[tool.status]} tool ", escape_line(tool.name) + status)]
    if tool.diff:
        rows.append((f"{HEAD}changed fields: "
                     + ", ".join(f"{escape_line(d.field)} {d.change}" for d in tool.diff), None))
    if tool.disabled is not None:
        rows.append((f"{HEAD}DISABLED by {escape_line(tool.disabled)}: it would not be offered",
                     None))
    if tool.opaque is not None:
        rows.append((f"{HEAD}opaque (ask or deny only): ", escape_line(tool.opaque)))
    said = claims(raw.get("annotations"))
    if said is not None:
        rows.append((f"{HEAD}the server says: {said}", None))
    for key in sorted(raw):
        if key == "name":
            continue
        value = raw[key]
        text = value if isinstance(value, str) else dumps(value)
        rows.append((f"{HEAD}{escape_line(key)}: ", escape_line(text)))
    for name, kind in sorted(tool.suggested_kinds.items()):
        rows.append((f"{HEAD}suggested kind {escape_line(kind)} for ", escape_line(name)))
    return rows


def probe_rows(probe: McpProbeAnswer) -> list[Row]:
    """The whole probe: the server, digest, current pin, counts, each tool, `invalidates`."""
    current = "none" if probe.pinned is None else (
        "this list" if probe.pinned == probe.digest else probe.pinned)
    rows: list[Row] = [(f"server {probe.server} · protocol {escape_line(probe.protocol)} · "
                        f"{len(probe.tools)} tools", None),
                       (f"digest  {probe.digest}", None),
                       (f"current {current}", None)]
    if probe.server_info is not None:
        rows.append(("the server says it is ", f"{escape_line(probe.server_info.name)} "
                                              f"{escape_line(probe.server_info.version)}"))
    counts = {status: sum(1 for t in probe.tools if t.status == status) for status in STATUSES}
    rows.append((", ".join(f"{n} {status}" for status, n in counts.items()), None))
    for tool in probe.tools:
        rows.append(("", None))
        rows += tool_rows(tool)
    if probe.invalidates:
        rows.append(("", None))
        rows.append(("this pin would invalidate these grants:", None))
        for item in probe.invalidates:
            why = item.rule or "the tool is no longer offered"
            rows.append((f"  {escape_line(item.grant)}  ({escape_line(why)})", None))
    return rows
