"""Pending asks do not shut everyone else out (issue 22 item 9).

brokerd served in-process over real Unix sockets, under trio's autojump
clock (virtual time: "within a second" is brokerd's clock, not the host's).

- Asks waiting for the owner are bounded per session (`[approvals]
  max_pending_per_session`) and in all (`max_pending`); the excess is
  recorded and denied `too_many_pending` at once.
- A connection waiting for the owner gives its place under `[sockets]
  max_connections` back, so a flood of asks leaves room for other calls:
  another session's allowed call is answered within a second while it lasts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.brokerd.test_serve import Client, ask, connect, echo_call, started
from tests.fakes.brokerd import ECHO_GRANT, Home

FLOOD = 300


def _ask_grant(root: Path) -> str:
    return f"""
[[grant]]
id = "notes-ask"
tool = "read_file"
mode = "ask"
paths = ["{root}/notes"]
"""


@pytest.fixture
def home() -> Iterator[Home]:
    made = Home(grants={"echo.toml": ECHO_GRANT})
    (made.grants / "ask.toml").write_text(_ask_grant(made.root))
    yield made
    made.cleanup()


def _ask_call(home: Home, rid: int, session: str) -> dict[str, Any]:
    return {"v": 1, "id": rid, "call": {"session": session, "tool": "read_file",
                                        "args": {"path": f"{home.root}/notes/a.txt"}}}


async def _flood(home: Home, sessions: list[str]) -> list[Client]:
    clients = []
    for rid, session in enumerate(sessions, start=1):
        client = await connect(home.broker)
        await client.send(_ask_call(home, rid, session))
        clients.append(client)
    return clients


async def _answers(clients: list[Client]) -> list[dict[str, Any]]:
    """The first answer of every flooding connection (brokerd must answer them all)."""
    out = []
    for client in clients:
        with trio.fail_after(30):
            got = await client.receive()
        assert got is not None
        out.append(got)
    return out


def _codes(answers: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for answer in answers:
        key = "pending" if "pending" in answer else answer["denied"]["code"]
        counts[key] = counts.get(key, 0) + 1
    return counts


async def _allowed_call_within_a_second(home: Home) -> None:
    with trio.fail_after(1.0):
        answer = await ask(home.broker, echo_call(9999, session="other"))
    assert answer[0]["result"]["status"] == "ok", answer


async def _close(clients: list[Client]) -> None:
    for client in clients:
        await client.stream.aclose()


async def test_one_session_flooding_asks_leaves_room_for_others(
        home: Home, autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        clients = await _flood(home, ["flood"] * FLOOD)
        # While the flood waits for the owner, another session is answered at once.
        await _allowed_call_within_a_second(home)
        answers = await _answers(clients)
        assert _codes(answers) == {"pending": 16, "too_many_pending": FLOOD - 16}
        denied = next(a["denied"] for a in answers if "denied" in a)
        assert denied["runbook"] == "docs/runbook.md#too-many-pending"
        assert denied["grant"] == "notes-ask"
        assert "16" in denied["reason"] and "flood" in denied["reason"]
        assert len(handle.daemon.ledger.pending) == 16
        # Every denial is recorded: a call and its decision, never an unrecorded call.
        decisions = [d["outcome"] for d in home.events("decision")]
        assert sum(1 for o in decisions if o.get("denied", {}).get("code")
                   == "too_many_pending") == FLOOD - 16
        assert len([c for c in home.events("call") if c["session"] == "flood"]) == FLOOD
        # A denied connection is closed by brokerd: nothing is left holding it.
        for client, answer in zip(clients, answers, strict=True):
            if "denied" in answer:
                assert await client.receive() is None
        await _close(clients)
        handle.stop()


async def test_many_sessions_flooding_hit_the_bound_in_all(
        home: Home, autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        clients = await _flood(home, [f"f{n}" for n in range(FLOOD)])
        await _allowed_call_within_a_second(home)
        answers = await _answers(clients)
        assert _codes(answers) == {"pending": 128, "too_many_pending": FLOOD - 128}
        reason = next(a["denied"]["reason"] for a in answers if "denied" in a)
        assert "128" in reason
        # The owner answers one: its room comes back for the next ask.
        first = next(a["pending"]["approval_id"] for a in answers if "pending" in a)
        assert await ask(home.admin, {"v": 1, "id": 1, "refuse": {
            "approval_id": first, "reason": None}}) == [{"id": 1, "ok": {}}]
        again = await connect(home.broker)
        await again.send(_ask_call(home, 5000, "late"))
        assert "pending" in (await again.receive() or {})
        refused = await ask(home.broker, _ask_call(home, 5001, "later"))
        assert refused[0]["denied"]["code"] == "too_many_pending"
        # Requesters that leave give their room back (recorded requester_gone).
        pending_clients = [c for c, a in zip(clients, answers, strict=True) if "pending" in a]
        await _close(pending_clients[1:11])
        await trio.testing.wait_all_tasks_blocked()
        assert len(handle.daemon.ledger.pending) == 118
        fresh = await _flood(home, [f"g{n}" for n in range(10)])
        assert _codes(await _answers(fresh)) == {"pending": 10}
        # Expiry gives all of it back.
        autojump_clock.jump(601.0)
        await trio.testing.wait_all_tasks_blocked()
        assert len(handle.daemon.ledger.pending) == 0
        after = await _flood(home, ["flood"] * 20)
        assert _codes(await _answers(after)) == {"pending": 16, "too_many_pending": 4}
        await _close([*clients, again, *fresh, *after])
        handle.stop()


async def test_the_bounds_are_configurable() -> None:
    made = Home(grants={"echo.toml": ECHO_GRANT},
                approvals_extra="max_pending = 3\nmax_pending_per_session = 2\n")
    (made.grants / "ask.toml").write_text(_ask_grant(made.root))
    try:
        async with trio.open_nursery() as nursery:
            handle = await started(nursery, made)
            clients = await _flood(made, ["a", "a", "a", "b", "b", "c"])
            assert [("pending" in a) for a in await _answers(clients)] == [
                True, True, False, True, False, False]
            await _close(clients)
            handle.stop()
    finally:
        made.cleanup()


async def test_pending_connections_leave_their_connection_place() -> None:
    """With max_connections = 2, two asks waiting for the owner still leave room."""
    made = Home(grants={"echo.toml": ECHO_GRANT}, extra="max_connections = 2\n")
    (made.grants / "ask.toml").write_text(_ask_grant(made.root))
    try:
        async with trio.open_nursery() as nursery:
            handle = await started(nursery, made)
            clients = await _flood(made, ["a", "b", "c", "d"])
            assert _codes(await _answers(clients)) == {"pending": 4}
            with trio.fail_after(5):
                answer = await ask(made.broker, echo_call(99, session="other"))
            assert answer[0]["result"]["status"] == "ok"
            await _close(clients)
            handle.stop()
    finally:
        made.cleanup()

