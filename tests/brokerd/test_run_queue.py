"""Bounded work per call (issue 11 item 3): the run queue, alone and inside brokerd
served in-process over real sockets.

In brokerd the runtime is one that holds every call until the test lets it go
(it stands in for podman, not for the queue under test), so that how many
calls run at once can be counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker.brokerd.runner._queue import RunnerBusy, RunQueue
from boxmaker.brokerd.runner._runtimes import Runtimes
from boxmaker.brokerd.runner._spec import RunOutcome, RunSpec
from tests.brokerd.test_serve import Home, ask, connect, echo_call, started


class HeldRuntime:
    """Runs `echo` once the test opens the gate; counts calls running at once."""

    kind = "echo"
    serves = frozenset({"test"})
    ok = True
    reason = None

    def __init__(self) -> None:
        self.gate = trio.Event()
        self.running = 0
        self.peak = 0
        self.ran: list[int] = []

    async def run(self, spec: RunSpec) -> RunOutcome:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.ran.append(spec.call_id)
        try:
            await self.gate.wait()
        finally:
            self.running -= 1
        return RunOutcome(status="ok", output={"text": spec.args["text"]})

    async def aclose(self) -> None:
        return None


def queue_home(extra: str) -> Home:
    return Home(runner_extra=extra)


@pytest.fixture
def home() -> Iterator[Home]:
    made = queue_home("max_concurrent = 4\nqueue_timeout_ms = 600000\n")
    yield made
    made.cleanup()


async def test_32_calls_against_4_slots(home: Home) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        runtime = HeldRuntime()
        handle.daemon.runtimes = Runtimes(runtime)
        answers: dict[int, list[dict[str, Any]]] = {}

        async def one(rid: int) -> None:
            answers[rid] = await ask(home.broker, echo_call(rid, session=f"s{rid}"))

        for rid in range(1, 33):
            nursery.start_soon(one, rid)
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.running == 4 and handle.daemon.run_queue.queued == 16
        assert len(answers) == 12  # the queue was full for them: answered at once
        for frames in answers.values():
            error = frames[0]["error"]
            assert error["code"] == "runner_unavailable"
            assert "too many calls at once" in error["message"]
            assert error["runbook"] == "docs/runbook.md#runner-unavailable"
        runtime.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert len(answers) == 32 and runtime.peak == 4 and len(runtime.ran) == 20
        statuses = sorted(r["status"] for r in home.events("result"))
        assert statuses == ["ok"] * 20 + ["runner_unavailable"] * 12
        handle.stop()


async def test_a_queued_call_whose_requester_left_never_runs(home: Home) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        runtime = HeldRuntime()
        handle.daemon.runtimes = Runtimes(runtime)
        for rid in range(1, 5):
            nursery.start_soon(ask, home.broker, echo_call(rid, session=f"s{rid}"))
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.running == 4
        leaving = await connect(home.broker)
        await leaving.send(echo_call(5, session="gone"))
        await trio.testing.wait_all_tasks_blocked()
        assert handle.daemon.run_queue.queued == 1
        await leaving.stream.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert handle.daemon.run_queue.queued == 0
        runtime.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        gone_call = next(c["seq"] for c in home.events("call") if c["session"] == "gone")
        assert gone_call not in runtime.ran and len(runtime.ran) == 4
        result = next(r for r in home.events("result") if r["call"] == gone_call)
        assert result["status"] == "runner_unavailable" and result["output"] is None
        handle.stop()


async def test_a_call_waits_at_most_queue_timeout_ms(
        autojump_clock: trio.testing.MockClock) -> None:
    home = queue_home("max_concurrent = 1\nmax_queued = 1\nqueue_timeout_ms = 2500\n")
    try:
        async with trio.open_nursery() as nursery:
            handle = await started(nursery, home)
            runtime = HeldRuntime()
            handle.daemon.runtimes = Runtimes(runtime)
            nursery.start_soon(ask, home.broker, echo_call(1))
            await trio.testing.wait_all_tasks_blocked()
            before = trio.current_time()
            frames = await ask(home.broker, echo_call(2))
            assert trio.current_time() - before == pytest.approx(2.5, abs=0.01)
            assert frames[0]["error"]["code"] == "runner_unavailable"
            assert "waited 2.5 s" in frames[0]["error"]["message"]
            runtime.gate.set()
            handle.stop()
    finally:
        home.cleanup()


# -- the queue alone -------------------------------------------------------------


async def test_first_come_first_served_and_bounded() -> None:
    queue = RunQueue(max_concurrent=1, max_queued=3, timeout_s=60)
    order: list[int] = []
    done = [trio.Event() for _ in range(4)]

    async def call(n: int) -> None:
        async with queue.slot():
            order.append(n)
            await done[n].wait()

    async with trio.open_nursery() as nursery:
        for n in (0, 3, 1, 2):  # they arrive in this order
            nursery.start_soon(call, n)
            await trio.testing.wait_all_tasks_blocked()
        assert queue.running == 1 and queue.queued == 3 and order == [0]
        with pytest.raises(RunnerBusy, match="too many calls at once"):
            await queue.acquire()
        for n in (0, 3, 1):
            done[n].set()
            await trio.testing.wait_all_tasks_blocked()
            assert queue.try_acquire() is False  # nobody overtakes the waiters
        done[2].set()
    assert order == [0, 3, 1, 2] and queue.running == 0 and queue.peak_running == 1


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    queue = RunQueue(max_concurrent=1, max_queued=4, timeout_s=60)
    assert queue.try_acquire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(queue.acquire)
        await trio.testing.wait_all_tasks_blocked()
        assert queue.queued == 1
        nursery.cancel_scope.cancel()
    assert queue.queued == 0 and queue.running == 1
    queue.release()
    assert queue.running == 0
