"""The verifier's pin-file rule (12 "Pins", step 8 of `_verify`): a `pinned`
record and the pin file its digest names must agree.  Pure: the caller reads the
file (`audit/pins/<digest>.json`) and passes its bytes, or None when it is absent.
"""

from __future__ import annotations

from collections.abc import Callable

from ..mcp import PinFileError, decode_pin
from ._audit_mcp import McpPinRecord

PinFile = Callable[[str], bytes | None]
"""digest -> the bytes of ``pins/<digest>.json``, or None when there is no such file."""


def pin_file_problem(record: McpPinRecord, data: bytes | None) -> str | None:
    """What is wrong between a `pinned` record and its pin file's bytes, or None.

    None also for a missing file (the server is unpinned then, `file_missing`:
    brokerd's, not the chain's).  The file must decode strictly in its canonical
    form with every hash recomputing (`decode_pin`), and hold the record's server,
    digest, protocol, tool count and source.
    """
    if data is None or record.digest is None:
        return None
    try:
        pin = decode_pin(data)
    except PinFileError as exc:
        return f"expected the pin file {record.digest}.json to be a pin, found: {exc.message}"
    source = record.source
    found_source = pin.source.to_json()
    want_source = None if source is None else {
        "transport": source.transport, "lifecycle": source.lifecycle, "image": source.image,
        "command_sha256": source.command_sha256, "env_sha256": source.env_sha256,
        "hosts": list(source.hosts), "private_network": source.private_network,
        "pin_ignore": list(source.pin_ignore)}
    differs = [name for name, want, found in (
        ("server", record.server, pin.server), ("digest", record.digest, pin.digest),
        ("protocol", record.protocol, pin.protocol), ("tools", record.tools, len(pin.tools)),
        ("source", want_source, found_source)) if want != found]
    if differs:
        return (f"expected the pin file {record.digest}.json to hold the record's "
                f"{', '.join(differs)}, found others")
    return None
