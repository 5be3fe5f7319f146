"""The probes brokerd holds for a pin: one use, 10 minutes, a bounded table."""

from __future__ import annotations

from boxmaker.brokerd._mcp_probes import MAX_HELD, PROBE_HELD_S, ProbeTable
from tests.brokerd._mcp_home import pin_for
from tests.brokerd.test_mcp_decide import SOURCE, TOOLS


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_probe_is_good_for_one_take_within_ten_minutes() -> None:
    clock = Clock()
    table = ProbeTable(clock)
    pin = pin_for(SOURCE, "time", TOOLS)
    first, second = table.new_id(), table.new_id()
    table.hold(first, "time", pin, (("g", None),))
    table.hold(second, "time", pin, ())
    held = table.take(first)
    assert held is not None and held.pin == pin and held.invalidates == (("g", None),)
    assert table.take(first) is None  # used
    clock.now += PROBE_HELD_S
    assert table.take(second) is None  # expired
    assert table.take(12345) is None  # never held


def test_the_table_keeps_the_newest_probes() -> None:
    table = ProbeTable(Clock())
    pin = pin_for(SOURCE, "time", TOOLS)
    for probe_id in range(MAX_HELD + 1):
        table.hold(probe_id, "time", pin, ())
    assert table.take(0) is None
    assert table.take(MAX_HELD) is not None and table.take(1) is not None
