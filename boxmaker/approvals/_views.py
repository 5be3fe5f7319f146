"""What the approval page shows of a pending approval: every field escaped.

Everything that came from the model or a tool is escaped exactly as bxctl
escapes it (07-bxctl "Escaping", `proto._escape`): the page then puts the
text into the document with `textContent` only, in a monospace block, so
HTML, scripts, ANSI sequences and bidirectional controls are inert and
visible.  Values are never cut; the page folds long ones.  Pure: no I/O.

A tool whose catalogue `approval` block is ``command`` (run_command) shows the
rows bxctl shows (`command_approval_rows`: argv one quoted token per line, cwd,
each mount with ro/rw, "network: none"), in the same `args` pairs, with `block`
naming it; the mounts are the ask grant's `paths`, which the page reads from the
grant files in brokerd's home (`_grant_mounts`), as bxctl does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ..proto._escape import escape_line
from ..proto._json import dumps
from ..proto.tools import CATALOGUE, command_approval_rows
from ..proto.wire import Approval, parse_ts
from ._history import Cause


def shown_value(value: Any) -> str:
    return escape_line(value if isinstance(value, str) else dumps(value))


def approval_view(approval: Approval, causes: list[Cause], now: dt.datetime,
                  mounts: Sequence[tuple[str, bool]] | None = None) -> dict[str, Any]:
    """The JSON the page's script renders for one pending approval.  `mounts`: a
    run_command ask grant's mounts, as the page read them from the grant files."""
    expires = parse_ts(approval.expires_at)
    state = approval.state
    entry = CATALOGUE.get(approval.tool)
    rows = (command_approval_rows(approval.args, approval.grant, mounts)
            if entry is not None and entry.approval == "command" else None)
    if rows is None:
        block = "args"
        args = [[escape_line(key), shown_value(approval.args[key])]
                for key in sorted(approval.args)]
    else:
        block = "command"
        args = [[field, value] for field, value in rows]
    raised = [{"seq": c.seq, "ts": c.ts, "tool": escape_line(c.tool), "label": c.label,
               "untrusted": c.untrusted} for c in causes]
    return {
        "approval_id": approval.approval_id,
        "call": approval.call,
        "tool": escape_line(approval.tool),
        "grant": escape_line(approval.grant),
        "session": approval.session,
        "label": state.label,
        "untrusted": state.untrusted,
        "taint_raised_by": raised,
        "block": block,
        "args": args,
        "requested_at": approval.requested_at,
        "expires_at": approval.expires_at,
        "seconds_left": max(0, int((expires - now).total_seconds())),
        "challenge": approval.challenge,
    }
