"""The pending table and the expiry sweep (05-brokerd "Approvals"), under a mock clock."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
import trio
import trio.testing

from boxmaker.brokerd._approvals import (
    ApprovalIdsExhausted,
    PendingApproval,
    PendingTable,
    run_expiry_sweep,
)
from boxmaker.brokerd._call_events import CallRequest, Ticket, denied
from boxmaker.brokerd._lifecycle import CallLifecycle
from boxmaker.proto._taint import NEW_SESSION


def entry(table: PendingTable, deadline: float) -> PendingApproval:
    call = CallLifecycle(1, CallRequest(session="s", tool="echo", args={}, peer_uid=1,
                                        peer_pid=2))
    return PendingApproval(
        call=call, args={}, state=NEW_SESSION,
        ticket=Ticket(approval_id=table.new_id(), grant="g",
                      requested_at="2026-11-29T07:00:00.000000Z",
                      expires_at="2026-11-29T07:10:00.000000Z", deadline=deadline, ttl_s=600.0,
                      challenge=b""),
    )


def test_ids_are_six_digits_and_never_reused() -> None:
    table = PendingTable()
    ids = {table.new_id() for _ in range(5000)}
    assert len(ids) == 5000 and all(100_000 <= i <= 999_999 for i in ids)


def counting_rng() -> Callable[[int], int]:
    """Draws 0, 1, 2, ...: every draw is a new id until the space is full."""
    counter = itertools.count()
    return lambda n: next(counter) % n


def test_ids_exhausted() -> None:
    table = PendingTable(rng=counting_rng())
    drawn = {table.new_id() for _ in range(900_000)}
    assert drawn == set(range(100_000, 1_000_000))
    with pytest.raises(ApprovalIdsExhausted):
        table.new_id()


def test_a_crowded_table_still_finds_the_free_ids() -> None:
    table = PendingTable(rng=lambda n: 0)  # every random draw hits a held id
    drawn = [table.new_id() for _ in range(300)]
    assert drawn == list(range(100_000, 100_300))


def test_an_id_rests_for_twice_the_ttl_after_its_record() -> None:
    now = [0.0]
    table = PendingTable(rng=counting_rng(), clock=lambda: now[0])
    first = table.new_id()
    for _ in range(899_999):
        table.new_id()
    table.release(first, 1200.0)  # its approval record is durable now, ttl 600 s
    now[0] = 1199.999
    with pytest.raises(ApprovalIdsExhausted):
        table.new_id()
    assert table.held() == 900_000
    now[0] = 1200.0
    assert table.new_id() == first
    with pytest.raises(ApprovalIdsExhausted):
        table.new_id()


def test_take_is_exactly_once() -> None:
    table = PendingTable()
    first = entry(table, 10)
    table.add(first)
    assert table.get(first.approval_id) is first
    assert table.take(first.approval_id) is first
    assert table.take(first.approval_id) is None
    assert len(table) == 0 and table.earliest_deadline() == math.inf


async def test_resolve_wakes_the_waiter() -> None:
    table = PendingTable()
    one = entry(table, 10)
    answer = denied("refused", "refused by the owner", "g")
    one.resolve(answer)
    assert one.answered and await one.wait() is answer
    with pytest.raises(AssertionError):
        one.resolve(answer)


async def test_sweep_expires_on_time(autojump_clock: trio.testing.MockClock) -> None:
    table = PendingTable()
    expired_at: list[tuple[float, list[int]]] = []

    async def expire(entries: list[PendingApproval]) -> None:
        expired_at.append((trio.current_time(), [e.approval_id for e in entries]))
        for e in entries:
            e.resolve(denied("expired", "the approval expired", "g"))

    async with trio.open_nursery() as nursery:
        await nursery.start(run_expiry_sweep, table, expire)
        start = trio.current_time()
        late = entry(table, start + 600)
        table.add(late)
        await trio.sleep(1)
        early = entry(table, start + 60)  # a new earliest expiry wakes the sweep
        table.add(early)
        taken = entry(table, start + 30)
        table.add(taken)
        await trio.sleep(5)
        assert table.take(taken.approval_id) is taken  # answered by the owner instead
        assert (await early.wait()).code == "expired"  # type: ignore[union-attr]
        assert (await late.wait()).code == "expired"  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()
    assert expired_at == [(start + 60, [early.approval_id]), (start + 600, [late.approval_id])]
    assert not taken.answered


async def test_take_all_empties(autojump_clock: trio.testing.MockClock) -> None:
    table = PendingTable()
    entries = [entry(table, 5), entry(table, 1)]
    for e in entries:
        table.add(e)
    assert table.items() == entries  # oldest first
    assert table.take_all() == entries and len(table) == 0
