"""Acceptance (issue 24): a walk of one loopd turn, of the same kind as brokerd's
call walk (tests/brokerd/test_call_walk.py, its recorder shared in tests/walks.py).

loopd's server runs in-process on a real loop.sock; the scripted fake
llama-server on a real unix socket asks for one `echo` call, then streams the
final answer; a scripted broker.sock (the stand-in of tests/loopd/test_turn.py)
allows the call.  `sys.setprofile` records every frame entered while the `say`
is answered, grouped into visits of the roles in ROLES.  The transparent
modules are the wire and its conversions, the frame helpers
(`_sockets/_streams`), the pure HTTP and SSE decoders, the tool schemas, trio.
The conversations are entered only through the store's reads and writes
(`append`, `load`, `list`): building a message or the chat messages is not a
visit.

The turn runs in a task of its own, which the shell starts (`LoopDaemon.
_run_turn`, beside the task watching for bxctl going away), so its walk is the
tree under that task's first shell frame.  It holds:
  - the shell dispatches the turn once (the inference's /health before it, the
    slot save after it);
  - each round of the turn is one inference stream (`chat`, entering it, its
    events, leaving it, its `result`: the turn pulls each event, nothing is
    pushed into it) and then at most one broker visit (the call);
  - no role appears twice on any path from the shell down (the broker client
    never calls back into the turn, the inference client never into the turn)
    but for one known callback, the turn's `emit`: each event goes out through
    a closure of the shell (`_run_turn.emit`, a frame written to loop.sock),
    so the path shell -> turn -> shell exists.  It is pinned here as the only
    re-entry, a leaf (the emit calls no role), so that any other callback
    fails; the second walk pins the callback of a call that waits for the
    owner (broker -> turn `on_pending` -> shell `emit`).
See docs/decisions.md, "the turn walk".
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest
import trio

from boxmaker._sockets._streams import send_frame
from boxmaker.loopd._config import load_config
from boxmaker.loopd._serve import serve
from boxmaker.proto._convert import U64
from boxmaker.proto.wire._wire import format_ts
from boxmaker.proto.wire._wire_broker import Pending, encode_broker_answer
from tests.fakes.llama_server import FakeLlamaServer
from tests.loopd.test_serve import PROPS, UID, Client, say
from tests.loopd.test_turn import BrokerScript, echo_call, ok_answer, serve_broker, text
from tests.walks import Roles, Visit, Walks, contains, paths

ROLES: Roles = [
    ("shell", "boxmaker._sockets._framed_server", None),
    ("shell", "boxmaker.loopd._serve", None),
    ("turn", "boxmaker.loopd._turn", None),
    ("conversations", "boxmaker.loopd._conversations", frozenset({"append", "load", "list"})),
    ("broker", "boxmaker.loopd._broker_client", None),
    ("inference", "boxmaker._http._llama_client", None),
    ("inference", "boxmaker._http._sse_stream", None),
    ("inference", "boxmaker._http._connection", None),
    ("inference", "boxmaker._http._fetch", None),
]
"""(role, module, entry points: None for every function).  The shell is loop.sock's
connection shell and loopd's part of it (`LoopDaemon.answer`, the busy guard, the
turn's task); the inference client is llama-server's client and the HTTP client
under it."""

STREAM = ["chat", "__aenter__", "__aiter__", "__anext__", "__aexit__", "result"]
"""The entries of one round's inference stream, each event's `__anext__` folded into one."""


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def walk_of_one_turn(root: Path, nursery: trio.Nursery, broker: BrokerScript,
                           *, pending: bool = False) -> tuple[Visit, list[Visit]]:
    """The visits under the turn's task, and every root recorded."""
    (root / "brokerd").mkdir()
    (root / "loopd.toml").write_text(
        f'home = "{root / "home"}"\n'
        f'socket = "{root / "run" / "loop.sock"}"\n'
        f"owner_uids = [{UID}]\n"
        "[inference]\n"
        f'socket = "{root / "llama.sock"}"\n'
        "[broker]\n"
        f'socket = "{root / "brokerd" / "broker.sock"}"\n'
        "[loop]\n"
        'tools = ["echo"]\n'
    )
    config = load_config(root / "loopd.toml")
    fake = FakeLlamaServer({"props": PROPS, "turns": [echo_call("a"), text("done")]})
    calls: list[str] = []
    await nursery.start(partial(fake.serve, unix_socket=root / "llama.sock"))
    await nursery.start(serve_broker, config.broker.socket, broker, calls)
    await nursery.start(partial(serve, config))
    walks = Walks(ROLES)
    with trio.fail_after(30):
        client = Client(await trio.open_unix_socket(os.fspath(config.socket)))
        sys.setprofile(walks.profile)
        try:
            await client.send(say(7))
            frames = await client.all()
        finally:
            sys.setprofile(None)
    assert calls == ["echo"]
    assert frames[-1] == {"id": 7, "done": {"finish": "stop", "rounds": 2, "usage": {
        "prompt_tokens": 24, "completion_tokens": 6}}}, frames
    kinds = [next(iter(f["event"])) for f in frames[:-1]]
    assert kinds == ["text", "tool_call", *(["approval_pending"] if pending else []),
                     "tool_result", "text"], kinds
    (walk,) = [r for r in walks.roots if contains(r, "turn")]
    return walk, walks.roots


def rounds_of(turn: Visit) -> list[list[str]]:
    """The turn's inference and broker visits (their entries), split at each `chat`,
    each run of `__anext__` folded into one."""
    rounds: list[list[str]] = []
    for child in turn.children:
        if child.role not in ("inference", "broker"):
            continue
        entry = f"broker.{child.entry}" if child.role == "broker" else child.entry
        if entry == "chat":
            rounds.append([])
        assert rounds, f"a visit before the first request: {turn.shape()}"
        if not (entry == "__anext__" and rounds[-1][-1:] == ["__anext__"]):
            rounds[-1].append(entry)
    return rounds


def re_entries(walk: Visit) -> list[tuple[tuple[str, ...], str]]:
    """Each path on which a role appears twice, with the entry of its last visit."""
    found: list[tuple[tuple[str, ...], str]] = []

    def down(visit: Visit, above: tuple[str, ...]) -> None:
        here = (*above, visit.role)
        if len(set(here)) < len(here):
            found.append((here, visit.entry))
        for child in visit.children:
            down(child, here)

    down(walk, ())
    return found


async def test_the_shell_dispatches_the_turn_once(tmp_path: Path, nursery: trio.Nursery) -> None:
    walk, roots = await walk_of_one_turn(tmp_path, nursery, ok_answer)
    assert walk.role == "shell" and walk.entry == "run", walk.shape()
    assert [(c.role, c.entry) for c in walk.children] == [
        ("inference", "health"), ("turn", "run"), ("inference", "save_slot")], walk.shape()
    # the connection's own shell task and the one watching bxctl reach no other role
    others = [r for r in roots if r is not walk]
    assert all(r.role == "shell" and not r.children for r in others), [
        r.shape() for r in others]


async def test_each_round_is_one_inference_stream_then_at_most_one_broker_call(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    walk, _ = await walk_of_one_turn(tmp_path, nursery, ok_answer)
    (turn,) = [c for c in walk.children if c.role == "turn"]
    assert rounds_of(turn) == [[*STREAM, "broker.call"], STREAM], turn.shape()
    # the broker client and the inference client call no role: no callback
    for child in turn.children:
        if child.role in ("inference", "broker", "conversations"):
            assert not child.children, turn.shape()


async def test_no_role_is_re_entered_but_by_the_turns_emit(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    walk, _ = await walk_of_one_turn(tmp_path, nursery, ok_answer)
    found = re_entries(walk)
    assert found and set(found) == {(("shell", "turn", "shell"), "emit")}, walk.shape()
    assert all(len(set(p)) == len(p) for p in paths(walk) if p[-2:] != ("turn", "shell"))


async def test_a_call_that_waits_for_the_owner_calls_back_into_the_turn(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """The pending answer: the broker client runs the turn's `on_pending` (which
    pauses the turn's clock and emits `approval_pending`), a second known callback."""

    async def pending_then_ok(stream: trio.SocketStream, request_id: int) -> None:
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=600)
        pending = Pending(approval_id=U64(7), grant="g", expires_at=format_ts(expires))
        await send_frame(stream, encode_broker_answer(request_id, pending))
        await ok_answer(stream, request_id)

    walk, _ = await walk_of_one_turn(tmp_path, nursery, pending_then_ok, pending=True)
    assert set(re_entries(walk)) == {
        (("shell", "turn", "shell"), "emit"),
        (("shell", "turn", "broker", "turn"), "on_pending"),
        (("shell", "turn", "broker", "turn", "shell"), "emit"),
    }, walk.shape()
