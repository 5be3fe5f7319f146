"""What the pin page shows of a pin link (12-tool-sources "Pinning", under
`require_passkey`): the probe as `bxctl mcp pin` printed it, every tool whole.

The rows are `boxmaker._probe_rows`' (bxctl's own): everything the server sent
is escaped exactly as bxctl escapes it, and the page puts the text into the
document with `textContent` only, in a monospace block, so HTML, scripts, ANSI
sequences and bidirectional controls are inert and visible.  Nothing is cut;
the page folds long rows.  Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .._probe_rows import probe_rows
from ..proto._escape import escape_line
from ..proto.wire import McpPinOptions, parse_ts


def pin_view(options: McpPinOptions, now: dt.datetime) -> dict[str, Any]:
    """The JSON the pin page's script renders: the rows, and what the browser signs."""
    probe = options.probe
    expires = parse_ts(options.expires_at)
    return {
        "server": probe.server,
        "digest": probe.digest,
        "tools": len(probe.tools),
        "invalidates": [[escape_line(i.grant), escape_line(i.rule or "no longer offered")]
                        for i in probe.invalidates],
        "rows": [[head, value] for head, value in probe_rows(probe)],
        "challenge": options.challenge,
        "rp_id": options.rp_id,
        "allow_credentials": list(options.allow_credentials),
        "expires_at": options.expires_at,
        "seconds_left": max(0, int((expires - now).total_seconds())),
    }
