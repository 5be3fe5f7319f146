"""broker.sock's `tools` query (12-tool-sources "Wire changes"): not recorded.

The offered tools of every pinned server as the model sees them, from the
pins (never from a live list).  The source set is refreshed first, as on a
decision; a change of it is recorded (`sources`) before the answer.
"""

from __future__ import annotations

import logging

from ..proto.wire import ToolItem, ToolsAnswer
from ._context import Daemon

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
