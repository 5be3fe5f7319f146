"""Bounded work per call (boxmaker/brokerd/runner/_queue.py): random arrivals,
run times and requesters that leave, on trio's mock clock; the invariants of
issue 11 hold for every schedule."""

from __future__ import annotations

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.brokerd.runner._queue import RunnerBusy, RunQueue


@attrs.define
class Call:
    arrives: float
    runs_for: float
    leaves_after: float | None
    started: float | None = None
    outcome: str = ""


calls_strategy = st.lists(
    st.builds(Call, arrives=st.integers(0, 200).map(lambda t: t / 4),
              runs_for=st.integers(1, 80).map(lambda t: t / 4),
              leaves_after=st.none() | st.integers(1, 120).map(lambda t: t / 4)),
    max_size=25).map(lambda calls: sorted(calls, key=lambda c: c.arrives))


@settings(max_examples=150, deadline=None)
@given(calls=calls_strategy, max_concurrent=st.integers(1, 3), max_queued=st.integers(0, 4),
       timeout_s=st.integers(1, 40))
def test_every_schedule_keeps_the_rules(calls: list[Call], max_concurrent: int,
                                        max_queued: int, timeout_s: int) -> None:
    queue = RunQueue(max_concurrent=max_concurrent, max_queued=max_queued,
                     timeout_s=float(timeout_s))
    start_order: list[int] = []
    seen_queued: list[int] = []

    async def one(index: int, call: Call) -> None:
        with trio.move_on_after(call.leaves_after if call.leaves_after else float("inf")):
            try:
                async with queue.slot():
                    call.started = trio.current_time()
                    start_order.append(index)
                    assert queue.running <= max_concurrent
                    await trio.sleep(call.runs_for)
                    call.outcome = "ran"
                    return
            except RunnerBusy as exc:
                call.outcome = "timeout" if "waited" in str(exc) else "full"
                return
        call.outcome = "left-running" if call.started is not None else "left-waiting"

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for index, call in enumerate(calls):
                await trio.sleep_until(call.arrives)
                nursery.start_soon(one, index, call)
                await trio.testing.wait_all_tasks_blocked()
                seen_queued.append(queue.queued)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    assert queue.peak_running <= max_concurrent
    assert queue.running == 0 and queue.queued == 0
    assert all(q <= max_queued for q in seen_queued)
    # First come, first served: no call starts later than one that arrived after it
    # (calls handed slots at the same instant may run their first step in any order).
    started = [(index, call.started) for index, call in enumerate(calls)
               if call.started is not None]
    assert [t for _, t in started] == sorted(t for _, t in started)
    assert sorted(start_order) == [index for index, _ in started]
    for call in calls:
        if call.outcome == "left-waiting":
            assert call.started is None  # a requester that left never runs
        if call.outcome == "timeout":
            assert call.started is None
        if call.started is not None:
            # it waited no longer than the timeout (and not past its requester)
            assert call.started - call.arrives <= timeout_s + 1e-9


async def test_the_queue_full_message_names_the_numbers() -> None:
    queue = RunQueue(max_concurrent=2, max_queued=0, timeout_s=5)
    assert queue.try_acquire() and queue.try_acquire()
    try:
        await queue.acquire()
    except RunnerBusy as exc:
        assert str(exc) == "too many calls at once (2 running, 0 waiting)"
    else:
        raise AssertionError("a full queue must refuse")


async def test_a_wait_past_the_timeout(autojump_clock: trio.abc.Clock) -> None:
    queue = RunQueue(max_concurrent=1, max_queued=1, timeout_s=2.5)
    assert queue.try_acquire()
    start = trio.current_time()
    try:
        await queue.acquire()
    except RunnerBusy as exc:
        assert str(exc) == "too many calls at once (waited 2.5 s for one of 1 slots)"
    assert trio.current_time() - start == 2.5
    assert queue.queued == 0 and queue.running == 1
