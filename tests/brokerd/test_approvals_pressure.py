"""Approvals keep their promises under pressure (issue 11 item 4), brokerd served
in-process over real sockets, under trio's mock clock.

- An approval whose deadline passed while the sweep's previous batch waited for
  a slow fsync cannot be approved: it is recorded `expired` and never runs.
- When every approval id is held, the call is recorded and denied
  `approvals_exhausted`; an id comes back 2 x ttl after its record.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker.brokerd._approvals import ID_SPAN
from tests.brokerd.test_serve import ECHO_ASK, GatedFsync, Home, ask, connect, echo_call, started


@pytest.fixture
def home() -> Any:
    made = Home()
    (made.grants / "echo.toml").write_text(ECHO_ASK)
    yield made
    made.cleanup()


async def test_approve_racing_the_expiry_under_a_slow_fsync(
        home: Home, mock_clock: trio.testing.MockClock) -> None:
    fsync = GatedFsync()
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home, fsync=fsync)
        early = await connect(home.broker)
        await early.send(echo_call(1))
        assert (await early.receive() or {}).get("pending")
        mock_clock.jump(1.0)
        late = await connect(home.broker)
        await late.send(echo_call(2))
        pending = await late.receive()
        assert pending is not None
        late_id = pending["pending"]["approval_id"]
        # The sweep expires the early approval; its record waits for a slow fsync.
        fsync.gate = trio.Event()
        mock_clock.jump(599.0)
        await trio.testing.wait_all_tasks_blocked()
        assert fsync.waiting == 1
        # Meanwhile the late approval's deadline passes too; the sweep is still stuck.
        mock_clock.jump(1.5)
        await trio.testing.wait_all_tasks_blocked()
        answers: list[list[dict[str, Any]]] = []

        async def approve() -> None:
            answers.append(await ask(home.admin, {"v": 1, "id": 9, "approve": {
                "approval_id": late_id}}))

        nursery.start_soon(approve)
        await trio.testing.wait_all_tasks_blocked()
        gate, fsync.gate = fsync.gate, None
        gate.set()
        final_early = await early.receive()
        final_late = await late.receive()
        await trio.testing.wait_all_tasks_blocked()
        assert final_early is not None and final_early["denied"]["code"] == "expired"
        assert final_late is not None and final_late["denied"]["code"] == "expired"
        assert answers and answers[0][0]["error"]["code"] == "no_such_approval"
        verdicts = {a["approval_id"]: a["verdict"] for a in home.events("approval")}
        assert verdicts[late_id] == "expired"
        assert set(verdicts.values()) == {"expired"}
        assert home.events("result") == []  # nothing ran
        await early.stream.aclose()
        await late.stream.aclose()
        handle.stop()


async def test_no_free_approval_id_is_recorded_and_denied(
        home: Home, mock_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        pending = handle.daemon.ledger.pending
        counter = itertools.count()
        pending._rng = lambda n: next(counter) % n  # fast draws to fill the id space
        for _ in range(ID_SPAN - 1):
            pending.new_id()
        last = await connect(home.broker)
        await last.send(echo_call(1))
        got = await last.receive()
        assert got is not None
        last_id = got["pending"]["approval_id"]
        calls_before = len(home.events("call"))
        refused = await ask(home.broker, echo_call(2))
        assert refused[0]["denied"]["code"] == "approvals_exhausted"
        assert refused[0]["denied"]["runbook"] == "docs/runbook.md#approvals-exhausted"
        assert len(home.events("call")) == calls_before + 1  # recorded, never unrecorded
        decision = home.events("decision")[-1]
        assert decision["outcome"]["denied"]["code"] == "approvals_exhausted"
        # The owner answers the last one; its id rests for 2 x ttl, then comes back.
        assert await ask(home.admin, {"v": 1, "id": 3, "refuse": {
            "approval_id": last_id, "reason": None}}) == [{"id": 3, "ok": {}}]
        assert (await last.receive() or {})["denied"]["code"] == "refused"
        mock_clock.jump(1199.0)
        again = await ask(home.broker, echo_call(4))
        assert again[0]["denied"]["code"] == "approvals_exhausted"
        mock_clock.jump(1.0)
        reused = await connect(home.broker)
        await reused.send(echo_call(5))
        got = await reused.receive()
        assert got is not None and got["pending"]["approval_id"] == last_id
        await last.stream.aclose()
        await reused.stream.aclose()
        handle.stop()
