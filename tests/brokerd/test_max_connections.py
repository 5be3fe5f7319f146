"""`[sockets] max_connections` (issue 11 item 3): past it, brokerd stops accepting
on that socket until a connection ends, so that many peers each sending a large
frame cannot exhaust its memory.  A call waiting for the owner gives its place
back (issue 22 item 9: `[approvals] max_pending` bounds those).  brokerd served
in-process, real sockets."""

from __future__ import annotations

import trio
import trio.testing

from tests.brokerd.test_serve import ECHO_ASK, Home, ask, connect, echo_call, started


async def test_accept_pauses_at_max_connections() -> None:
    home = Home(extra="max_connections = 2\n")
    (home.grants / "echo.toml").write_text(ECHO_ASK)
    try:
        with trio.fail_after(60):
            await _accept_pauses(home)
    finally:
        home.cleanup()


async def _accept_pauses(home: Home) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        # Two asks waiting for the owner hold no place ...
        waiting = []
        for rid in (1, 2):
            client = await connect(home.broker)
            await client.send(echo_call(rid, session=f"s{rid}"))
            assert (await client.receive() or {}).get("pending")
            waiting.append(client)
        # ... two connections that have not sent their request yet do.
        silent = [await connect(home.broker) for _ in range(2)]
        await trio.testing.wait_all_tasks_blocked()
        third = await connect(home.broker)  # the kernel's backlog takes it ...
        await third.send(echo_call(3, session="s3"))
        await trio.testing.wait_all_tasks_blocked()
        assert len(handle.daemon.ledger.pending) == 2  # ... brokerd does not read it
        assert [c["session"] for c in home.events("call")] == ["s1", "s2"]
        # The admin socket has its own places.
        items = (await ask(home.admin, {"v": 1, "id": 7, "approvals": {}}))[0]
        first = items["approvals"]["items"][0]["approval_id"]
        await ask(home.admin, {"v": 1, "id": 8, "refuse": {"approval_id": first,
                                                           "reason": None}})
        assert (await waiting[0].receive() or {})["denied"]["code"] == "refused"
        assert await waiting[0].receive() is None
        await trio.testing.wait_all_tasks_blocked()
        assert [c["session"] for c in home.events("call")] == ["s1", "s2"]
        await silent[0].stream.aclose()  # a place is free
        got = await third.receive()
        assert got is not None and "pending" in got
        assert [c["session"] for c in home.events("call")] == ["s1", "s2", "s3"]
        for client in (*waiting, *silent, third):
            await client.stream.aclose()
        handle.stop()
