"""The pin state from the log: newest record after the last accepted break, then the file."""

from __future__ import annotations

from boxmaker.proto.mcp._pin import encode_pin
from boxmaker.proto.mcp._pin_ledger import PinLedger
from tests.proto.mcp.test_pin import pin_of


def test_each_reason() -> None:
    pin = pin_of()
    data = encode_pin(pin)
    ledger = PinLedger()
    assert ledger.check("time", file=data, current=pin.source).reason == "none"
    ledger.pinned("time", pin.digest, 10)
    found = ledger.check("time", file=data, current=pin.source)
    assert found.reason is None and found.pin == pin
    assert ledger.check("time", file=None, current=pin.source).reason == "file_missing"
    ledger.drifted("time", 11)
    assert ledger.check("time", file=data, current=pin.source).reason == "drifted"
    ledger.pinned("time", pin.digest, 12)
    ledger.unpinned("time", 13)
    assert ledger.check("time", file=data, current=pin.source).reason == "unpinned"
    ledger.pinned("time", pin.digest, 14)
    ledger.accepted_break()
    assert ledger.check("time", file=data, current=pin.source).reason == "before_break"
    ledger.pinned("time", pin.digest, 20)
    assert ledger.check("time", file=data, current=pin.source).pin == pin
    assert ledger.newest("time") is not None and ledger.newest("time").seq == 20


def test_a_pin_whose_record_is_for_another_digest() -> None:
    pin = pin_of()
    ledger = PinLedger()
    ledger.pinned("time", "f" * 64, 1)
    assert ledger.check("time", file=encode_pin(pin), current=pin.source).reason == \
        "file_damaged"
