"""Acceptance (issue 12): a walk of one allowed call from broker.sock to its audit
lines and its answer passes through the shell, the table and the writer, and back,
with no module visited twice.

A real brokerd serves in-process on a real unix socket; `sys.setprofile` records
every Python frame entered while one allowed `echo` call is answered.  Frames of
the modules in ROLES are grouped into *visits*: a visit to a role starts when a
new frame of it is entered through one of its entry points from a frame of
another role, and takes in every frame it calls of its own role.  Frames of any
other module (the policy and its link, proto/_convert and the other pure
helpers, the runner, trio) are transparent: they neither start nor end a visit.
So is a frame of an entry-restricted role entered other than through its entry
(an attrs validator, a property read, a constructor): reading or building a
value is not a visit.  A resumed coroutine is the same frame, not a new visit.

The walk is the tree of visits under the connection's shell task.  It holds:
  - no role appears twice on any path from the shell down (no callbacks: the
    ledger never calls back into the broker, the writer never into the ledger);
  - the shell dispatches the call once, to the broker;
  - the broker drives the call in its steps, and within each step (a subtree)
    no role is visited twice: the decision is one ledger step (table, then
    writer), the start one table move, the result one ledger step (table, writer).
The recorder is tests/walks.py, shared with the turn walk (tests/loopd/test_turn_walk.py).
See docs/decisions.md, issue 12 "the call walk".
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from tests.brokerd.test_serve import ECHO_ASK, ask, connect, echo_call, started
from tests.fakes.brokerd import Home
from tests.walks import Roles, Visit, Walks, contains, paths, roles_in

ROLES: Roles = [
    ("shell", "boxmaker._sockets._framed_server", None),
    ("broker", "boxmaker.brokerd._broker", None),
    ("admin", "boxmaker.brokerd._admin", None),
    ("ledger", "boxmaker.brokerd._ledger", None),
    ("table", "boxmaker.brokerd._lifecycle", frozenset({"feed"})),
    ("writer", "boxmaker.brokerd.log._audit_writer", frozenset({"append"})),
]
"""(role, module, entry points: None for every function).  The path modules, by
role; the lead updates this list when the connection shell moves (issue 12 item 3:
add its module under "shell")."""


@pytest.fixture
def home() -> Iterator[Home]:
    made = Home()
    yield made
    made.cleanup()


async def walk_of_one_allowed_call(home: Home) -> Visit:
    walks = Walks(ROLES)
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        with trio.fail_after(30):
            sys.setprofile(walks.profile)
            try:
                answers = await ask(home.broker, echo_call(7))
            finally:
                sys.setprofile(None)
        assert answers == [{"id": 7, "result": {
            "status": "ok", "output": {"text": "hi"}, "label": "public", "untrusted": False}}]
        handle.stop()
    events = [key for line in home.audit_lines() for key in line
              if key in ("call", "decision", "result")]
    assert events == ["call", "decision", "result"], events
    (walk,) = [r for r in walks.roots if contains(r, "table")]
    return walk


async def test_one_allowed_call_visits_no_module_twice(home: Home) -> None:
    walk = await walk_of_one_allowed_call(home)
    shape = walk.shape()
    for path in paths(walk):
        assert len(set(path)) == len(path), f"a role is re-entered on {path}: {shape}"
    assert walk.role == "shell" and [c.role for c in walk.children] == ["broker"], shape
    (broker,) = walk.children
    for step in broker.children:
        seen = roles_in(step)
        assert len(set(seen)) == len(seen), f"a role visited twice in one step: {shape}"
    assert broker.shape() == ("broker", [("ledger", ["table", "writer"]), "table",
                                         ("ledger", ["table", "writer"])]), shape


async def test_an_approved_call_is_answered_in_one_admin_step(home: Home) -> None:
    """The owner's approve: shell -> admin -> ledger -> (table, writer), and the
    waiting call goes on in its own walk (table started, then its result)."""
    (home.grants / "echo.toml").write_text(ECHO_ASK)
    walks = Walks(ROLES)
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        with trio.fail_after(30):
            client = await connect(home.broker)
            await client.send(echo_call(3))
            pending = await client.receive()
            assert pending is not None
            approval_id = pending["pending"]["approval_id"]
            sys.setprofile(walks.profile)
            try:
                ok = await ask(home.admin, {"v": 1, "id": 2, "approve": {
                    "approval_id": approval_id}})
                final = await client.receive()
            finally:
                sys.setprofile(None)
            assert ok == [{"id": 2, "ok": {}}]
            assert final is not None and final["result"]["status"] == "ok"
            await client.stream.aclose()
        handle.stop()
    admin_walks = [r for r in walks.roots if contains(r, "admin")]
    (walk,) = admin_walks
    for path in paths(walk):
        assert len(set(path)) == len(path), f"a role is re-entered on {path}: {walk.shape()}"
    (admin,) = walk.children
    assert admin.role == "admin"
    steps = [c.shape() for c in admin.children]
    assert steps == [("ledger", ["table", "writer"])], walk.shape()
    (waiter,) = [r for r in walks.roots if contains(r, "table") and not contains(r, "admin")]
    assert waiter.shape() == ("shell", [("broker", ["table", ("ledger", ["table", "writer"])])])


def test_a_callback_is_seen_as_a_second_visit() -> None:
    """The recorder itself: a broker function that the ledger calls back (the old
    `rule` lambda of `Ledger.decide`) puts the broker on the path twice."""
    walks = Walks(ROLES)
    files = {role: sys.modules[name].__file__ or "" for role, name, _ in ROLES}
    scope: dict[str, Any] = {}
    exec(compile("def handle(step, rule):\n    return step(rule)\n"
                 "def rule():\n    return 1\n", files["broker"], "exec"), scope)
    exec(compile("def decide(rule):\n    return rule()\n",
                 files["ledger"], "exec"), scope)
    sys.setprofile(walks.profile)
    try:
        scope["handle"](scope["decide"], scope["rule"])
    finally:
        sys.setprofile(None)
    (root,) = walks.roots
    assert root.shape() == ("broker", [("ledger", ["broker"])])
    repeated = [p for p in paths(root) if len(set(p)) < len(p)]
    assert repeated == [("broker", "ledger", "broker")]
