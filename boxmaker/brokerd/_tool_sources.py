"""brokerd's MCP tool sources while it serves (12-tool-sources): the source set,
each server's pin state, and what `status` and the `sources` record say of them.

`ToolSources.refresh()` is called on every decision, as the grant set's
watcher is: a cheap fingerprint of the sources directory (names, sizes,
mtimes, ctimes, inodes); only a change re-reads and re-parses it, and then the
server states are computed again from the pin ledger and the pin files.  A
change of the set's validity or digest gives one `sources` record.  A pin
event (the owner pinned or unpinned, a drift) is fed with its record's `seq`
(`pinned`, `unpinned`, `drifted`) and recomputes the server states.  The
runtime of `mcp.*` calls is handed the new states each time (`on_states`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from ..policy._load import DirectoryListing, fingerprint
from ..policy._mcp_verdict import McpRegistry, RegisteredServer
from ..proto._convert import U64
from ..proto.audit import McpPinRecord, PasskeyUse, PinSourceRecord, SourcesChanged
from ..proto.mcp import (
    InvalidSourceSet,
    Pin,
    PinLedger,
    SourceProblem,
    SourceSet,
    SourcesReport,
    SourceState,
    ToolSourcesConfig,
    ToolVerdict,
    sources_digest,
    tool_verdicts,
    tools_answer,
)
from ._mcp_sources import load_sources, server_states
from .runner._mcp_runtime import McpServerState

log = logging.getLogger("brokerd")

_UNSET: Final = object()
EMPTY_SOURCES_DIGEST: Final = sources_digest(())
"""The digest of no files: a missing or empty sources directory."""


@attrs.frozen(kw_only=True)
class SourcesSummary:
    """`Status.sources`: ``{"ok", "count", "digest", "pinned", "unpinned"}``."""

    ok: bool
    count: int
    digest: str
    pinned: int
    unpinned: int


def unreadable_sources(message: str) -> InvalidSourceSet:
    return InvalidSourceSet(report=SourcesReport(
        ok=False, count=0, digest=EMPTY_SOURCES_DIGEST,
        problems=(SourceProblem(file=".", index=None, server=None, rule="S1",
                                message=message),)))


def sources_event(state: SourceState) -> SourcesChanged:
    report = state.report
    return SourcesChanged(ok=report.ok, count=U64(report.count), digest=report.digest,
                          problem_count=U64(len(report.problems)))


class ToolSources:
    """The source set and the server states, re-read when the directory changes."""

    def __init__(self, directory: Path, pins: PinLedger, audit_dir: Path, *,
                 runner_output_max: int,
                 on_states: Callable[[Mapping[str, McpServerState]], None] | None = None
                 ) -> None:
        self.directory = directory
        self.pins = pins
        self.audit_dir = audit_dir
        self.runner_output_max = runner_output_max
        self.on_states = on_states
        self._fingerprint: object = _UNSET
        self._listing = DirectoryListing()
        self.state: SourceState = SourceSet(servers={}, digest=EMPTY_SOURCES_DIGEST)
        self.servers: dict[str, McpServerState] = {}
        self.verdicts: dict[str, dict[str, ToolVerdict]] = {}
        """Each pinned server's tools by MCP name: offered (with its grammar and the
        model's view), or disabled and why (12 "Pin-dependent checks")."""
        self._tools: tuple[dict[str, Any], list[str]] | None = None
        self._registry: McpRegistry | None = None

    def _load(self) -> SourceState:
        config = ToolSourcesConfig(dir=str(self.directory))
        try:
            return load_sources(self.directory, config, runner_output_max=self.runner_output_max)
        except OSError as exc:
            return unreadable_sources(f"the sources directory cannot be read "
                                      f"({exc.strerror or exc})")

    def refresh(self) -> tuple[SourceState, list[SourcesChanged]]:
        """The current source set, plus a `sources` record when it changed (and on the
        first call, when the directory exists)."""
        before = self._fingerprint
        current = fingerprint(self.directory, self._listing)
        if before is not _UNSET and current == before:
            return self.state, []
        old = self.state
        new = SourceSet(servers={}, digest=EMPTY_SOURCES_DIGEST) if current is None \
            else self._load()
        self._fingerprint = current
        self.state = new
        self.recompute()
        # A home without a sources directory keeps its log as it was before tool
        # sources existed: no `sources` record at start (docs/decisions.md).
        changed = current is not None if before is _UNSET else (
            old.report.ok != new.report.ok or old.report.digest != new.report.digest
            or (before is None) != (current is None))
        if not changed:
            return new, []
        if new.report.ok:
            log.info("sources: %d MCP servers, digest %s", new.report.count, new.report.digest)
        else:
            log.warning("sources: %d problems; every mcp.* call is denied "
                        "(bxctl mcp check lists them)", len(new.report.problems))
        return new, [sources_event(new)]

    def recompute(self) -> None:
        """The server states again, from the ledger and the pin files (after a pin
        event, or a new source set)."""
        state = self.state
        self.servers = server_states(state, self.pins, self.audit_dir) \
            if isinstance(state, SourceSet) else {}
        self.verdicts = {server: tool_verdicts(one.decl, one.pin)
                         for server, one in self.servers.items() if one.pin is not None}
        self._tools = None
        self._registry = None
        if self.on_states is not None:
            self.on_states(self.servers)

    def registry(self) -> McpRegistry:
        """The tool registry `decide` takes for `mcp.*` calls (12 "Deciding")."""
        if self._registry is None:
            report = self.state.report
            self._registry = McpRegistry(valid=report.ok, digest=report.digest, servers={
                server: RegisteredServer(
                    decl=one.decl, pin=one.pin.digest if one.pin is not None else None,
                    unpinned=one.unpinned, verdicts=self.verdicts.get(server, {}))
                for server, one in self.servers.items()})
        return self._registry

    def tools(self) -> tuple[dict[str, Any], list[str]]:
        """broker.sock's `tools` answer (``{"digest", "items"}``), and the servers left
        out whole because their tools would not fit one frame."""
        if self._tools is None:
            self._tools = tools_answer(self.verdicts)
        return self._tools

    def offered(self, server: str, local: str) -> ToolVerdict | None:
        """The offered tool `mcp.<server>.<local>` of a pinned server, or None."""
        for verdict in self.verdicts.get(server, {}).values():
            if verdict.status == "offered" and verdict.local == local:
                return verdict
        return None

    def pinned(self, server: str, digest: str, seq: int) -> None:
        self.pins.pinned(server, digest, seq)
        self.recompute()

    def unpinned(self, server: str, seq: int) -> None:
        self.pins.unpinned(server, seq)
        self.recompute()

    def drifted(self, server: str, seq: int) -> None:
        self.pins.drifted(server, seq)
        self.recompute()

    def summary(self) -> SourcesSummary:
        report = self.state.report
        pinned = sum(1 for s in self.servers.values() if s.pin is not None)
        return SourcesSummary(ok=report.ok, count=report.count, digest=report.digest,
                              pinned=pinned, unpinned=len(self.servers) - pinned)


def pin_record(pin: Pin, *, prev: str | None, by: int, passkey: PasskeyUse | None = None,
               reason: str | None = None) -> McpPinRecord:
    """The `mcp_pin pinned` record of a pin whose file is durable."""
    source = pin.source
    return McpPinRecord(
        server=pin.server, action="pinned", digest=pin.digest, prev=prev,
        tools=U64(len(pin.tools)), protocol=pin.protocol,
        source=PinSourceRecord(transport=source.transport, lifecycle=source.lifecycle,
                               image=source.image, command_sha256=source.command_sha256,
                               env_sha256=source.env_sha256, hosts=list(source.hosts),
                               private_network=source.private_network,
                               pin_ignore=list(source.pin_ignore)),
        by=U64(by), passkey=passkey, reason=reason)


def unpin_record(server: str, *, prev: str | None, by: int, reason: str | None
                 ) -> McpPinRecord:
    return McpPinRecord(server=server, action="unpinned", digest=None, prev=prev, tools=None,
                        protocol=None, source=None, by=U64(by), passkey=None, reason=reason)
