"""broker.sock's `tools` query (12-tool-sources "Wire changes"): not recorded; and
the `mcp_server` records of what the MCP runtime saw during a call.

The offered tools of every pinned server as the model sees them, from the
pins (never from a live list).  The source set is refreshed first, as on a
decision; a change of it is recorded (`sources`) before the answer.

The MCP runtime tells brokerd of a drift or the start of a cool-down as it
happens (`McpEvent`, kept in `Daemon.mcp_events`); `record_mcp_events` writes
them as `mcp_server` records after the call's `result`, and a drift unpins the
server from then on (the pin ledger is fed the record's `seq`).
"""

from __future__ import annotations

import logging

from ..proto._convert import U64
from ..proto.audit import DriftNames, McpServerRecord
from ..proto.wire import ToolItem, ToolsAnswer
from ._context import Daemon
from .runner._mcp_runtime import McpEvent

MAX_REASON = 1024

log = logging.getLogger("brokerd")


async def tools_of(daemon: Daemon) -> ToolsAnswer:
    sources = daemon.sources
    if sources is None:
        return ToolsAnswer(digest=EMPTY_ITEMS_DIGEST, items=[])
    _, events = sources.refresh()
    if events:
        await daemon.ledger.record(list(events))
    answer, left_out = sources.tools()
    for server in left_out:
        log.warning("tools: the server %s is left out: its tools would not fit one frame",
                    server)
    return ToolsAnswer(digest=answer["digest"],
                       items=[ToolItem(**item) for item in answer["items"]])


EMPTY_ITEMS_DIGEST = "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
"""SHA-256 of ``[]``: no tool-source tools."""


def _record_of(event: McpEvent) -> McpServerRecord:
    run = event.run
    drift = run.drift if run is not None else None
    names = None if drift is None else DriftNames(**drift.record())
    return McpServerRecord(
        server=event.server, call=U64(event.call), probe_id=None, container=event.container,
        event=event.event, protocol=run.protocol if run is not None else None,
        list_digest=run.list_digest if run is not None else None,
        reason=event.reason.encode("ascii", "backslashreplace").decode()[:MAX_REASON],
        drift=names if event.event == "drifted" else None)


async def record_mcp_events(daemon: Daemon) -> None:
    """Write the MCP runtime's pending events; a drift unpins its server."""
    events, daemon.mcp_events[:] = list(daemon.mcp_events), []
    if not events:
        return
    records = await daemon.ledger.record([_record_of(event) for event in events])
    for event, record in zip(events, records, strict=True):
        if event.event == "drifted" and daemon.sources is not None:
            daemon.sources.drifted(event.server, record.seq)
