"""The ledger: steps atomic, records durable before a step's caller goes on (04-audit)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker.brokerd._call_events import CallRequest, Run, Started
from boxmaker.brokerd._ledger import Ledger, NoSuchApproval, NoSuchSession, NotLower, Opened
from boxmaker.brokerd._policy_link import PolicyLink
from boxmaker.brokerd._state import read_state, write_state
from boxmaker.brokerd.log._audit_writer import (
    AuditUnavailable,
    AuditWriter,
    inline_fsync,
    lock_audit_dir,
    open_audit_dir,
)
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantState
from boxmaker.proto._taint import FAIL_CLOSED, NEW_SESSION, Taint
from boxmaker.proto.audit._audit import GENESIS_PREV, parse_record
from boxmaker.proto.wire import ErrorAnswer, Result

PRIVATE = Taint(label="private", untrusted=False)


class GatedFsync:
    """An fsync that waits for the test to open the gate; counts calls."""

    def __init__(self) -> None:
        self.gate = trio.Event()
        self.calls = 0

    async def __call__(self, fd: int) -> None:
        self.calls += 1
        await self.gate.wait()
        os.fsync(fd)


@pytest.fixture
def audit_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "audit"


def grants(mode: str = "allow", label: str = "public", untrusted: bool = False) -> GrantState:
    return parse_grant_texts({"echo.toml": f"""
[[grant]]
id = "g"
tool = "echo"
mode = "{mode}"
label = "{label}"
untrusted = {"true" if untrusted else "false"}
max_label = "secret"
when_untrusted = "{mode}"
"""})


def make_ledger(tmp_path: Path, fsync: Any = inline_fsync, write: Any = os.write,
                taints: dict[str, tuple[Taint, int]] | None = None) -> Ledger:
    dir_fd = open_audit_dir(tmp_path / "audit")
    writer = AuditWriter(dir_fd=dir_fd, lock_fd=lock_audit_dir(dir_fd), next_seq=0,
                         prev=GENESIS_PREV, current_file=None, fsync=fsync, write=write)
    return Ledger(writer=writer, sessions_dir=tmp_path / "state" / "sessions",
                  taints=taints or {}, link=PolicyLink.of(["/srv/boxmaker"]),
                  state_in_thread=False, ttl_ms=60_000, wall_clock=lambda: 1_800_000_000.0)


async def decide(ledger: Ledger, mode: str = "allow", session: str = "s1",
                 **extra: Any) -> Opened:
    request = CallRequest(session=session, tool="echo", args={"text": "x"}, peer_uid=1,
                          peer_pid=2)
    return await ledger.decide(request, grants(mode, **extra))


def lines(tmp_path: Path) -> list[Any]:
    out = []
    for name in sorted(os.listdir(tmp_path / "audit")):
        if name.endswith(".jsonl"):
            out += [parse_record(line) for line in (tmp_path / "audit" / name).read_bytes()
                    .splitlines()]
    return out


async def test_steps_queue_synchronously_and_wait_for_the_fsync(tmp_path: Path) -> None:
    fsync = GatedFsync()
    ledger = make_ledger(tmp_path, fsync=fsync)
    done: list[Opened] = []
    async with trio.open_nursery() as nursery:

        async def one() -> None:
            done.append(await decide(ledger))

        nursery.start_soon(one)
        nursery.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()
        # Both steps queued their records at once (seqs 0..3), neither returned.
        assert ledger.writer.next_seq == 4 and done == []
        fsync.gate.set()
    assert sorted(d.call.call_id for d in done) == [0, 2]
    assert fsync.calls <= 2  # group commit: the second step may share the first fsync
    kinds = [type(r.event).__name__ for r in lines(tmp_path)]
    assert kinds == ["BoundedCall", "DecisionRecord", "BoundedCall", "DecisionRecord"]


async def test_settle_raises_the_taint_as_it_is_now(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    first = await decide(ledger, label="private")
    second = await decide(ledger, untrusted=True)
    first.call.feed(Started())
    second.call.feed(Started())
    reply = await ledger.settle(first.call, "ok", {"text": "x"}, None)
    assert isinstance(reply, Result) and reply.label == "private"
    assert ledger.taint_of("s1") == PRIVATE
    await ledger.settle(second.call, "timeout", None, None)
    assert ledger.taint_of("s1") == Taint(label="private", untrusted=True)
    nothing = await decide(ledger, untrusted=True)
    call_record = [r.event for r in lines(tmp_path) if type(r.event).__name__ == "DecisionRecord"]
    assert call_record[-1].state == Taint(label="private", untrusted=True)
    assert isinstance(nothing.reply, Run)
    reply = await ledger.not_run(nothing.call, "the queue is full")
    assert isinstance(reply, ErrorAnswer) and reply.code == "runner_unavailable"
    kept = ledger.taint_of("s1")
    assert kept == Taint(label="private", untrusted=True)
    results = [r.event for r in lines(tmp_path) if type(r.event).__name__ == "ResultRecord"]
    assert results[0].output is not None and results[0].output.bytes == len(b'{"text":"x"}')
    assert results[2].output is None and results[2].state == kept
    await ledger.flush_states()
    state = read_state(tmp_path / "state" / "sessions", "s1", head_seq=ledger.head_seq)
    assert state is not None and state.taint == Taint(label="private", untrusted=True)


async def test_answer_takes_exactly_once(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    asked = await decide(ledger, "ask")
    assert asked.approval is not None
    approval_id = asked.approval.approval_id
    await ledger.answer(approval_id, grants("ask"), by=1000)
    with pytest.raises(NoSuchApproval):
        await ledger.answer(approval_id, grants("ask"), by=1000, refuse=True)
    answer = await asked.approval.wait()
    assert isinstance(answer, Run) and answer.allow.grant == "g"
    approval = lines(tmp_path)[-1].event
    assert approval.verdict == "approved" and approval.by == 1000


async def test_declassify(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, taints={"s1": (PRIVATE, 0)})
    with pytest.raises(NoSuchSession):
        await ledger.declassify("never", to=NEW_SESSION, by=0, reason="x")
    with pytest.raises(NotLower):
        await ledger.declassify("s1", to=Taint(label="secret", untrusted=False), by=0,
                                reason="x")
    with pytest.raises(NotLower):
        await ledger.declassify("s1", to=Taint(label="public", untrusted=True), by=0,
                                reason="x")
    await ledger.declassify("s1", to=NEW_SESSION, by=7, reason="reviewed")
    assert ledger.session_view("s1") == (NEW_SESSION, 0)
    record = lines(tmp_path)[-1].event
    assert (record.from_, record.to, record.by) == (PRIVATE, NEW_SESSION, 7)


async def test_damaged_state_file_is_secret_untrusted(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    sessions = tmp_path / "state" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "hurt.json").write_bytes(b"{broken")
    write_state(sessions, "fine", PRIVATE, 0)
    await decide(ledger, session="hurt")
    assert ledger.taint_of("hurt") == FAIL_CLOSED
    assert lines(tmp_path)[-1].event.state == FAIL_CLOSED
    assert ledger.taint_of("fine") == PRIVATE  # a sound file is a cache the ledger uses
    assert ledger.session_count() == 2


async def test_unavailable_is_sticky_and_nothing_is_answered_as_recorded(tmp_path: Path) -> None:
    calls = 0

    def write(fd: int, data: bytes) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(28, "No space left on device")
        return os.write(fd, data)

    ledger = make_ledger(tmp_path, write=write)
    await decide(ledger)
    for mode in ("allow", "ask", "deny"):
        opened = await decide(ledger, mode)
        assert isinstance(opened.reply, ErrorAnswer)
        assert opened.reply.code == "audit_unavailable"
        assert "No space left on device" in opened.reply.message
        assert opened.approval is None
    with pytest.raises(AuditUnavailable):
        await ledger.record([])
    assert len(ledger.pending) == 0  # an ask that was not recorded never waits
    assert ledger.pending.asking() == 0  # ... nor counts against [approvals] max_pending


async def test_a_session_seen_in_the_log_exists(tmp_path: Path) -> None:
    dir_fd = open_audit_dir(tmp_path / "audit")
    writer = AuditWriter(dir_fd=dir_fd, lock_fd=lock_audit_dir(dir_fd), next_seq=0,
                         prev=GENESIS_PREV, current_file=None, fsync=inline_fsync)
    ledger = Ledger(writer=writer, sessions_dir=tmp_path / "sessions", taints={},
                    link=PolicyLink.of([]), known_sessions=["seen"], state_in_thread=False)
    assert ledger.session_view("seen") == (NEW_SESSION, 0)
    assert ledger.session_view("never") is None
    await writer.aclose()


def test_each_step_reads_and_feeds_synchronously_and_awaits_only_the_append() -> None:
    """The "no await between reading the state and appending" rule, held by the
    shape of the code: the `_..._now` halves are plain functions, and `_commit`
    awaits nothing but the writer's append."""
    import ast
    import inspect

    from boxmaker.brokerd import _ledger

    tree = ast.parse(inspect.getsource(_ledger))
    (ledger,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Ledger"]
    methods = {f.name: f for f in ledger.body
               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    halves = [name for name in methods if name.endswith("_now")]
    assert sorted(halves) == ["_answer_now", "_decide_now", "_settle_now"]
    assert all(isinstance(methods[name], ast.FunctionDef) for name in halves)
    awaited = [ast.unparse(n.value.func) for n in ast.walk(methods["_commit"])
               if isinstance(n, ast.Await) and isinstance(n.value, ast.Call)]
    assert awaited == ["self.writer.append", "self.writer.append"]  # shielded or not
    for name in ("decide", "settle", "not_run", "answer"):
        calls = [ast.unparse(n.value.func) for n in ast.walk(methods[name])
                 if isinstance(n, ast.Await) and isinstance(n.value, ast.Call)]
        assert set(calls) <= {"self._commit", "self.expire"}, (name, calls)


async def test_concurrent_asks_cannot_all_pass_the_pending_bound(tmp_path: Path) -> None:
    """issue 22 item 9: an ask counts from its decision, before its fsync, so a burst
    of asks whose records share one fsync cannot overshoot max_pending_per_session."""
    fsync = GatedFsync()
    ledger = make_ledger(tmp_path, fsync=fsync)
    ledger._max_pending_per_session = 3
    opened: list[Opened] = []

    async def one() -> None:
        opened.append(await decide(ledger, "ask"))

    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()
        assert ledger.pending.asking("s1") == 3 and len(ledger.pending) == 0
        fsync.gate.set()
    codes = sorted(getattr(o.reply, "code", "pending") for o in opened)
    assert codes == ["pending"] * 3 + ["too_many_pending"] * 7
    assert len(ledger.pending) == 3
    other = await decide(ledger, "ask", session="s2")  # another session has its own room
    assert other.approval is not None
