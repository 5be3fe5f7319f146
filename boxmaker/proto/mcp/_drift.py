"""Drift between a pin and a live list (12 "Loading and checking a pin", `mcp_server drifted`).

Before every call the live list's digest is computed with the live protocol
and the current declaration's `source`; a different digest is drift.  This
module says what differs: tools added, removed (a renamed tool is both) and
changed (with the top-level fields that changed), another protocol version,
another `source`.  `drift_record` bounds it as the record's `drift` field:
names cut at 128 characters, at most 32 per list, sorted; the counts are in
the reason.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from ._pin import Pin, PinnedTool, PinSource, list_digest, source_changes

MAX_LISTED: Final = 32
MAX_NAME: Final = 128
Status = Literal["same", "changed", "added", "removed"]


@attrs.frozen(kw_only=True)
class FieldChange:
    field: str
    change: Literal["added", "removed", "changed"]


def tool_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """The top-level Tool fields that differ, in code-point order."""
    out: list[FieldChange] = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            out.append(FieldChange(field=key, change="removed"))
        elif key not in old:
            out.append(FieldChange(field=key, change="added"))
        elif old[key] != new[key] or type(old[key]) is not type(new[key]):
            out.append(FieldChange(field=key, change="changed"))
    return tuple(out)


@attrs.frozen(kw_only=True)
class ToolStatus:
    """One tool of a probe against the current pin (`status`, `diff` of the answer)."""

    name: str
    status: Status
    diff: tuple[FieldChange, ...] = ()


def compare_tools(pinned: Sequence[PinnedTool] | None,
                  live: Sequence[PinnedTool]) -> tuple[ToolStatus, ...]:
    """Every tool of either list, by name: same, changed (with its fields), added, removed.
    Without a pin every live tool is added."""
    old = {tool.name: tool for tool in pinned or ()}
    new = {tool.name: tool for tool in live}
    out: list[ToolStatus] = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            out.append(ToolStatus(name=name, status="removed"))
        elif name not in old:
            out.append(ToolStatus(name=name, status="added"))
        elif old[name].sha256 == new[name].sha256:
            out.append(ToolStatus(name=name, status="same"))
        else:
            out.append(ToolStatus(name=name, status="changed",
                                  diff=tool_diff(old[name].raw, new[name].raw)))
    return tuple(out)


@attrs.frozen(kw_only=True)
class Drift:
    pinned: str
    live: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    protocol: tuple[str, str] | None
    """(pinned, live) when the version differs."""
    source: tuple[str, ...]
    """The `source` fields that differ from the pin's."""

    def _groups(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(tool status, names) for the three kinds of difference, in the record's order."""
        return (("added", self.added), ("removed", self.removed), ("changed", self.changed))

    def reason(self) -> str:
        parts = [f"{len(names)} {word}" for word, names in self._groups() if names]
        text = "the tool list differs from the pin"
        if parts:
            text += ": " + ", ".join(parts)
        if self.protocol is not None:
            text += f"; protocol {self.protocol[1]} where {self.protocol[0]} was pinned"
        if self.source:
            text += f"; the declaration changed: {', '.join(self.source)}"
        return text

    def record(self) -> dict[str, Any]:
        """The `drift` field of an `mcp_server drifted` record, bounded."""
        def bounded(names: tuple[str, ...]) -> list[str]:
            return sorted(name[:MAX_NAME] for name in names)[:MAX_LISTED]
        record: dict[str, Any] = {"pinned": self.pinned}
        record.update((word, bounded(names)) for word, names in self._groups())
        return record


def drift(pin: Pin, *, protocol: str, source: PinSource,
          tools: Sequence[PinnedTool]) -> Drift | None:
    """None when the live list's digest equals the pin's (the call may be sent)."""
    live = list_digest(protocol, pin.server, source, tools)
    if live == pin.digest:
        return None
    statuses = compare_tools(pin.tools, tools)
    def named(status: Status) -> tuple[str, ...]:
        return tuple(s.name for s in statuses if s.status == status)
    return Drift(pinned=pin.digest, live=live, added=named("added"), removed=named("removed"),
                 changed=named("changed"),
                 protocol=None if protocol == pin.protocol else (pin.protocol, protocol),
                 source=tuple(source_changes(pin.source, source)))
