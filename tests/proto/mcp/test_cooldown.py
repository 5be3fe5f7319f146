"""Three failures within ten minutes cool a server down for five; restart ends it."""

from __future__ import annotations

from boxmaker.proto.mcp._cooldown import CoolDown


def test_three_failures_within_the_window() -> None:
    c = CoolDown()
    assert not c.failure(0.0) and not c.failure(100.0)
    assert c.failures == 2
    assert c.failure(600.0)  # the third, 600 s after the first: within 10 minutes
    assert c.cooling(600.0) and c.cooling(899.9) and not c.cooling(900.0)
    assert c.failures == 0


def test_failures_spread_out_never_cool_down() -> None:
    c = CoolDown()
    assert not any(c.failure(t * 301.0) for t in range(10))


def test_failures_while_cooling_do_not_extend_it_and_restart_ends_it() -> None:
    c = CoolDown()
    for t in (0.0, 1.0, 2.0):
        c.failure(t)
    assert not c.failure(3.0) and c.cooling(301.9)
    assert c.restart(10.0) and not c.cooling(10.0)
    assert not c.restart(11.0)
