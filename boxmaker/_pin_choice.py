"""Which pin holds for each declared server, from the log: brokerd's choice, shared
with bxctl's offline commands (12-tool-sources "Loading and checking a pin").

- `feed_pins`: one record into the `PinLedger` (an accepted `break`, an
  `mcp_pin`, an `mcp_server drifted`); brokerd's start-up fold and
  `ledger_of_lines` use it.
- `ledger_of_lines`: the ledger of a log's lines, parsing only the lines of
  those three keys (bxctl reads the log offline; it does not verify the chain,
  `bxctl audit verify` does).
- `choose_pins`: each declared server's `PinCheck`: the newest record's pin
  file read through `read` (brokerd's `audit/pins/` reader), checked.

Pure: the caller reads the files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from .proto._errors import DecodeError
from .proto.audit import Break, McpPinRecord, McpServerRecord, Record, parse_record
from .proto.mcp import PinCheck, PinLedger, ServerDecl, pin_source

PIN_KEYS: Final = (b'mcp_pin":', b'mcp_server":', b'break":')
"""The event keys whose records move the ledger, as a line holds them after `prev`."""
_PREV: Final = b'"prev":"'
_KEY_AT: Final = len(_PREV) + 64 + 3  # the prev hash, then `","` before the event key


def feed_pins(ledger: PinLedger, record: Record) -> None:
    """One verified record, in order."""
    event = record.event
    if isinstance(event, Break):
        ledger.accepted_break()
    elif isinstance(event, McpPinRecord):
        if event.action == "pinned" and event.digest is not None:
            ledger.pinned(event.server, event.digest, record.seq)
        else:
            ledger.unpinned(event.server, record.seq)
    elif isinstance(event, McpServerRecord) and event.event == "drifted":
        ledger.drifted(event.server, record.seq)


def moves_pins(line: bytes) -> bool:
    """Whether the line is a record of one of `PIN_KEYS` (by its one written form)."""
    at = line.find(_PREV)
    return at >= 0 and line.startswith(PIN_KEYS, at + _KEY_AT)


def ledger_of_lines(lines: Iterable[bytes]) -> PinLedger:
    """The ledger of a log's lines, in order.  A line of those keys that does not
    parse is passed over (a log brokerd would not serve on: `bxctl audit verify`)."""
    ledger = PinLedger()
    for line in lines:
        if moves_pins(line):
            try:
                record = parse_record(line)
            except DecodeError:
                continue
            feed_pins(ledger, record)
    return ledger


def choose_pins(servers: Mapping[str, ServerDecl], ledger: PinLedger,
                read: Callable[[str], bytes | None]) -> dict[str, PinCheck]:
    """Every declared server's pin, or why it is unpinned (`read`: digest -> the pin
    file's bytes, None when missing)."""
    out: dict[str, PinCheck] = {}
    for server_id, decl in servers.items():
        newest = ledger.newest(server_id)
        data = read(newest.digest) if newest is not None and newest.digest is not None \
            else None
        out[server_id] = ledger.check(server_id, file=data, current=pin_source(decl))
    return out
