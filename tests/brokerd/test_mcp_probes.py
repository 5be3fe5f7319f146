"""The probes brokerd holds for a pin: one use, 10 minutes, a bounded table; the
answer bxctl showed and the pin page's links, which live as long as their probe."""

from __future__ import annotations

from boxmaker.brokerd._mcp_probes import MAX_HELD, MAX_LINKS, PROBE_HELD_S, ProbeTable
from boxmaker.proto._convert import U64
from boxmaker.proto.wire import McpProbeAnswer
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


def _shown(probe_id: int) -> McpProbeAnswer:
    return McpProbeAnswer(probe_id=U64(probe_id), server="time", protocol="2025-11-25",
                          digest="9a1f" * 16, pinned=None, server_info=None, tools=[],
                          invalidates=[])


def test_a_pin_link_lives_as_long_as_its_probe() -> None:
    clock = Clock()
    table = ProbeTable(clock)
    pin = pin_for(SOURCE, "time", TOOLS)
    table.hold(7, "time", pin, ())
    table.show(_shown(7))
    table.show(_shown(8))  # a probe not held: nothing to keep
    assert table.peek(8) is None
    token = table.link(7)
    assert len(token) == 64 and token != table.link(7)  # each link its own token
    found = table.linked(token)
    assert found is not None and found[0] == 7 and found[1].shown == _shown(7)
    peeked = table.peek(7)
    assert peeked is not None and peeked.shown == _shown(7)  # peeking leaves it held
    taken = table.take(7)  # the pin is made: the link names nothing any more
    assert taken is not None and table.linked(token) is None
    table.give_back(7, taken)  # a refused passkey: held again, but that link is gone
    assert table.linked(token) is None and table.linked(table.link(7)) is not None
    clock.now += PROBE_HELD_S
    assert table.peek(7) is None and table.linked(table.link(7)) is None  # expired
    assert table.linked("0" * 64) is None


def test_the_newest_links_are_kept() -> None:
    table = ProbeTable(Clock())
    table.hold(7, "time", pin_for(SOURCE, "time", TOOLS), ())
    tokens = [table.link(7) for _ in range(MAX_LINKS + 1)]
    assert table.linked(tokens[0]) is None
    assert all(table.linked(token) is not None for token in tokens[1:])
