"""brokerd served in-process: answers never leave before their records are durable;
expiry, the request-frame deadline and shutdown under a mock clock (05-brokerd)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._brokerd_config import load_config
from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.brokerd._serve import ServeHandle, serve
from boxmaker.brokerd._state import write_state
from boxmaker.brokerd.log._audit_writer import inline_fsync
from boxmaker.proto._framing import FrameDecoder
from boxmaker.proto._taint import Taint
from tests.fakes.brokerd import ECHO_GRANT, Home

ECHO_ASK = ECHO_GRANT.replace('mode = "allow"', 'mode = "ask"')


@pytest.fixture
def home() -> Iterator[Home]:
    made = Home()
    yield made
    made.cleanup()


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def send(self, obj: dict[str, Any]) -> None:
        await send_frame(self.stream, json.dumps(obj).encode())

    async def receive(self) -> dict[str, Any] | None:
        body = await receive_frame(self.stream, self.decoder)
        return None if body is None else json.loads(body)


async def connect(path: Any) -> Client:
    return Client(await trio.open_unix_socket(os.fspath(path)))


async def ask(path: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
    client = await connect(path)
    await client.send(obj)
    out = []
    while (frame := await client.receive()) is not None:
        out.append(frame)
    await client.stream.aclose()
    return out


def echo_call(rid: int = 1, session: str = "s1") -> dict[str, Any]:
    return {"v": 1, "id": rid, "call": {"session": session, "tool": "echo",
                                        "args": {"text": "hi"}}}


class GatedFsync:
    def __init__(self) -> None:
        self.gate: trio.Event | None = None
        self.waiting = 0

    async def __call__(self, fd: int) -> None:
        if self.gate is not None:
            self.waiting += 1
            await self.gate.wait()
            self.waiting -= 1
        os.fsync(fd)


async def started(nursery: trio.Nursery, home: Home, **kwargs: Any) -> ServeHandle:
    config = load_config(home.config)
    kwargs.setdefault("fsync", inline_fsync)
    kwargs.setdefault("state_in_thread", False)
    handle: ServeHandle = await nursery.start(lambda task_status: serve(
        config, task_status=task_status, **kwargs))
    return handle


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def test_no_answer_before_its_fsync_returns(home: Home, nursery: trio.Nursery) -> None:
    fsync = GatedFsync()
    handle = await started(nursery, home, fsync=fsync)
    fsync.gate = trio.Event()
    client = await connect(home.broker)
    await client.send(echo_call(5))
    answers: list[dict[str, Any] | None] = []

    async def read() -> None:
        answers.append(await client.receive())

    nursery.start_soon(read)
    await trio.testing.wait_all_tasks_blocked()
    assert fsync.waiting == 1 and answers == []  # call + decision queued, not yet durable
    assert handle.daemon.ledger.writer.next_seq == 3
    gate, fsync.gate = fsync.gate, trio.Event()
    gate.set()  # call + decision durable; the tool runs; the result waits for its fsync
    await trio.testing.wait_all_tasks_blocked()
    assert fsync.waiting == 1 and answers == []
    fsync.gate.set()
    fsync.gate = None
    await trio.testing.wait_all_tasks_blocked()
    assert answers and answers[0] is not None and answers[0]["result"]["status"] == "ok"
    await client.stream.aclose()
    handle.stop()


async def test_approval_is_durable_before_the_call_goes_on(home: Home,
                                                           nursery: trio.Nursery) -> None:
    (home.grants / "echo.toml").write_text(ECHO_ASK)
    fsync = GatedFsync()
    handle = await started(nursery, home, fsync=fsync)
    client = await connect(home.broker)
    await client.send(echo_call(5))
    pending = await client.receive()
    assert pending is not None
    approval_id = pending["pending"]["approval_id"]
    fsync.gate = trio.Event()
    admin_answers: list[list[dict[str, Any]]] = []

    async def approve() -> None:
        admin_answers.append(await ask(home.admin, {"v": 1, "id": 2, "approve": {
            "approval_id": approval_id}}))

    nursery.start_soon(approve)
    await trio.testing.wait_all_tasks_blocked()
    assert fsync.waiting == 1 and admin_answers == []
    assert len(handle.daemon.ledger.pending) == 0  # taken at once: a second taker finds none
    fsync.gate.set()
    fsync.gate = None
    final = await client.receive()
    assert final is not None and final["result"]["status"] == "ok"
    await trio.testing.wait_all_tasks_blocked()
    assert admin_answers == [[{"id": 2, "ok": {}}]]
    await client.stream.aclose()
    handle.stop()


async def test_expiry_on_time(home: Home, nursery: trio.Nursery,
                              autojump_clock: trio.testing.MockClock) -> None:
    (home.grants / "echo.toml").write_text(ECHO_ASK)
    handle = await started(nursery, home)
    client = await connect(home.broker)
    await client.send(echo_call(5))
    pending = await client.receive()
    assert pending is not None and "pending" in pending
    before = trio.current_time()
    final = await client.receive()
    assert final is not None and final["denied"]["code"] == "expired"
    assert trio.current_time() - before == pytest.approx(600, abs=0.01)
    assert home.events("approval")[-1]["verdict"] == "expired"
    await client.stream.aclose()
    handle.stop()


async def test_request_frame_deadline(home: Home, nursery: trio.Nursery,
                                      autojump_clock: trio.testing.MockClock) -> None:
    handle = await started(nursery, home)
    client = await connect(home.broker)
    before = trio.current_time()
    answer = await client.receive()
    assert answer is not None and answer["error"]["code"] == "bad_frame"
    assert trio.current_time() - before == pytest.approx(10, abs=0.01)
    assert await client.receive() is None
    await client.stream.aclose()
    handle.stop()


async def test_shutdown_expires_pending_and_records_stop(home: Home) -> None:
    (home.grants / "echo.toml").write_text(ECHO_ASK)
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        client = await connect(home.broker)
        await client.send(echo_call(5))
        assert (await client.receive() or {}).get("pending")
        idle = await connect(home.broker)  # connected, no request yet
        await trio.testing.wait_all_tasks_blocked()
        handle.stop()
        final = await client.receive()
        assert final is not None and final["denied"]["code"] == "expired"
        assert await idle.receive() is None
        await client.stream.aclose()
        await idle.stream.aclose()
    approval = home.events("approval")[-1]
    assert approval["verdict"] == "expired" and approval["reason"] == "shutdown"
    assert home.audit_lines()[-1]["stop"] == {"reason": "shutdown"}


async def test_damaged_state_file_at_start(home: Home, nursery: trio.Nursery) -> None:
    sessions = home.state / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "hurt.json").write_text('{"label": "public"}')
    write_state(sessions, "ahead", Taint(label="public", untrusted=False), 99)
    handle = await started(nursery, home)
    assert any("hurt" in w for w in handle.daemon.warnings)
    assert any("ahead" in w for w in handle.daemon.warnings)
    answer = await ask(home.broker, echo_call(1, "hurt"))
    assert answer[0]["denied"]["code"] == "taint"  # the echo grant applies up to public
    decision = home.events("decision")[-1]
    assert decision["state"] == {"label": "secret", "untrusted": True}
    handle.stop()


async def test_podman_missing_is_runner_unavailable(nursery: trio.Nursery) -> None:
    home = Home(runner="podman", runner_extra='podman = "/nonexistent/podman"\n'
                f'image = "sha256:{"0" * 64}"\n')
    try:
        handle_ = await started(nursery, home)
        status = (await ask(home.admin, {"v": 1, "id": 1, "status": {}}))[0]["status"]
        assert status["runner"]["kind"] == "podman" and status["runner"]["ok"] is False
        assert status["runner"]["image"] == "sha256:" + "0" * 64
        assert status["runner"]["reason"]
        answer = await ask(home.broker, echo_call(2))
        assert answer[0]["error"]["code"] == "runner_unavailable"
        assert answer[0]["error"]["runbook"] == "docs/runbook.md#runner-unavailable"
        assert home.events("result")[-1]["status"] == "runner_unavailable"
        handle_.stop()
    finally:
        home.cleanup()


async def test_a_lost_listener_stops_brokerd(home: Home) -> None:
    from boxmaker._sockets._unix import ListenerLost

    lost: list[BaseException] = []
    try:
        async with trio.open_nursery() as nursery:
            handle = await started(nursery, home)
            # Something other than running out of descriptors: the listener is closed.
            handle.listeners[0].close()
    except* ListenerLost as group:
        lost.extend(group.exceptions)
    assert len(lost) == 1
    assert home.audit_lines()[-1]["stop"] == {"reason": "listener lost"}


async def test_unreadable_grants_deny_every_call(home: Home, nursery: trio.Nursery) -> None:
    handle = await started(nursery, home)
    assert (await ask(home.broker, echo_call(1)))[0]["result"]["status"] == "ok"
    for item in home.grants.iterdir():
        item.unlink()
    home.grants.rmdir()
    home.grants.symlink_to(home.grants)  # a loop: listing it fails with ELOOP
    for rid in (2, 3):
        answer = await ask(home.broker, echo_call(rid))
        assert answer[0]["denied"]["code"] == "grants_invalid"
    grants = home.events("grants")
    assert len(grants) == 1 and grants[0]["ok"] is False
    handle.stop()


@pytest.mark.parametrize(("wait", "approved"), [(599.999, True), (600.001, False)])
async def test_approve_against_the_expiry(home: Home, nursery: trio.Nursery,
                                          autojump_clock: trio.testing.MockClock,
                                          wait: float, approved: bool) -> None:
    (home.grants / "echo.toml").write_text(ECHO_ASK)
    handle = await started(nursery, home)
    client = await connect(home.broker)
    await client.send(echo_call(5))
    pending = await client.receive()
    assert pending is not None
    await trio.sleep(wait)
    answer = await ask(home.admin, {"v": 1, "id": 2, "approve": {
        "approval_id": pending["pending"]["approval_id"]}})
    final = await client.receive()
    assert final is not None
    if approved:
        assert answer == [{"id": 2, "ok": {}}] and final["result"]["status"] == "ok"
    else:
        assert answer[0]["error"]["code"] == "no_such_approval"
        assert final["denied"]["code"] == "expired"
    verdicts = [a["verdict"] for a in home.events("approval")]
    assert verdicts == (["approved"] if approved else ["expired"])
    await client.stream.aclose()
    handle.stop()


RUN_COMMAND_ALLOW = """
[[grant]]
id = "git-read"
tool = "run_command"
mode = "allow"
paths = ["/home/me/src"]
commands = [["git", ["status", "log"]]]
rest = "any"
"""


async def test_run_command_without_commands_is_runner_unavailable(
        home: Home, nursery: trio.Nursery) -> None:
    (home.grants / "commands.toml").write_text(RUN_COMMAND_ALLOW)
    handle = await started(nursery, home)
    call = {"v": 1, "id": 3, "call": {"session": "s1", "tool": "run_command",
                                      "args": {"argv": ["git", "log"], "cwd": "/home/me/src"}}}
    answer = await ask(home.broker, call)
    error = answer[0]["error"]
    assert error["code"] == "runner_unavailable"
    assert error["runbook"] == "docs/runbook.md#commands-unconfigured"
    assert "[commands]" in error["message"]
    assert home.events("decision")[-1]["grant"] == "git-read"
    result = home.events("result")[-1]
    assert result["status"] == "runner_unavailable" and result["output"] is None
    # a call no grant covers is still denied before any runtime is asked
    call["call"]["args"] = {"argv": ["git", "push"], "cwd": "/home/me/src"}  # type: ignore[index]
    answer = await ask(home.broker, call)
    assert answer[0]["denied"]["code"] == "no_grant"
    handle.stop()


async def test_g21_at_load_against_brokerds_commands_path(
        home: Home, nursery: trio.Nursery) -> None:
    # a grant over a directory of [commands] path: the whole set is invalid (G21)
    (home.grants / "commands.toml").write_text(RUN_COMMAND_ALLOW.replace(
        '"/home/me/src"', '"/opt/tools"'))
    home.config.write_text(home.config.read_text() + f'\n[commands]\nimage = "sha256:{"a" * 64}"'
                           '\npath = "/opt/tools/bin:/usr/bin:/bin"\n')
    handle = await started(nursery, home)
    call = {"v": 1, "id": 3, "call": {"session": "s1", "tool": "run_command",
                                      "args": {"argv": ["git", "log"], "cwd": "/opt/tools"}}}
    answer = await ask(home.broker, call)
    assert answer[0]["denied"]["code"] == "grants_invalid", answer
    handle.stop()
