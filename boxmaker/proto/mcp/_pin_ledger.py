"""Which pin holds, from the log (12 "Loading and checking a pin").

brokerd keeps, per server, the newest of its `mcp_pin` and `mcp_server
drifted` records after the last accepted `break`; records before a break are
not trusted to grant anything, as for passkeys.  The server is pinned when that
record is `mcp_pin` `pinned` and its file holds (`check_pin`); otherwise it is
unpinned with the reason.  The log reader feeds the records in order (their
`seq`); this fold does no I/O.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ._pin import PinCheck, PinSource, check_pin

Event = Literal["pinned", "unpinned", "drifted"]


@attrs.frozen(kw_only=True)
class Newest:
    event: Event
    seq: int
    digest: str | None


class PinLedger:
    """The newest pin event of each server, split at the last accepted break."""

    def __init__(self) -> None:
        self._after: dict[str, Newest] = {}
        self._before: set[str] = set()
        self._last_pinned: dict[str, str] = {}

    def pinned(self, server: str, digest: str, seq: int) -> None:
        self._after[server] = Newest(event="pinned", seq=seq, digest=digest)
        self._last_pinned[server] = digest

    def last_pinned(self, server: str) -> str | None:
        """The digest of the server's newest `pinned` record, whatever came after it
        (an `mcp_pin` record's `prev`)."""
        return self._last_pinned.get(server)

    def unpinned(self, server: str, seq: int) -> None:
        self._after[server] = Newest(event="unpinned", seq=seq, digest=None)

    def drifted(self, server: str, seq: int) -> None:
        self._after[server] = Newest(event="drifted", seq=seq, digest=None)

    def accepted_break(self) -> None:
        """Everything fed so far is from before the break."""
        self._before |= set(self._after)
        self._after.clear()

    def newest(self, server: str) -> Newest | None:
        return self._after.get(server)

    def check(self, server: str, *, file: bytes | None, current: PinSource) -> PinCheck:
        """The server's pin state; `file` is `audit/pins/<digest>.json` of the newest
        `pinned` record (None when missing), read by the caller."""
        newest = self._after.get(server)
        if newest is None:
            return PinCheck(pin=None, reason="before_break" if server in self._before
                            else "none")
        if newest.event != "pinned" or newest.digest is None:
            return PinCheck(pin=None, reason="unpinned" if newest.event == "unpinned"
                            else "drifted")
        return check_pin(file, server=server, record_digest=newest.digest, current=current)
