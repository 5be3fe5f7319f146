"""loopd's daemon (boxmaker/loopd/_serve.py) served in-process over a real loop.sock,
against the scripted fake llama-server on a real Unix socket: readiness after the
self-test, status, a turn streamed as frames, the busy guard, bxctl going away,
loop.sock's own wording of bad frames and refusals (06-loopd, 02-wire)."""

from __future__ import annotations

import json
import os
import socket
import struct
from collections import Counter
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._errors import StartFailed
from boxmaker._sockets._streams import receive_frame, send_frame
from boxmaker.loopd import _serve
from boxmaker.loopd._config import LoopdConfig, load_config
from boxmaker.loopd._serve import (
    InferenceStartFailed,
    LoopDaemon,
    answer_waiting_clients,
    serve,
)
from boxmaker.proto._framing import FrameDecoder
from tests.fakes.llama_server import FakeLlamaServer

UID = os.getuid()
PROPS = {"total_slots": 4, "n_ctx": 262144, "supports_tool_calls": True}


def text_turn(words: str, *, pause_s: float = 0) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"role": "assistant"}]
    if pause_s:
        steps.append({"sleep_s": pause_s})
    steps += [{"text": words}, {"finish": "stop"}, {"usage": True}]
    return {"steps": steps}


def say(rid: int, text: str = "hi", conversation: str = "c1") -> dict[str, Any]:
    return {"v": 1, "id": rid, "say": {"conversation": conversation, "text": text}}


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def send(self, obj: dict[str, Any] | bytes) -> None:
        await send_frame(self.stream, obj if isinstance(obj, bytes) else json.dumps(obj).encode())

    async def receive(self) -> dict[str, Any] | None:
        body = await receive_frame(self.stream, self.decoder)
        return None if body is None else json.loads(body)

    async def all(self) -> list[dict[str, Any]]:
        out = []
        with trio.fail_after(60):
            while (frame := await self.receive()) is not None:
                out.append(frame)
        await self.stream.aclose()
        return out


class Loop:
    def __init__(self, root: Path, fake: FakeLlamaServer, config: LoopdConfig) -> None:
        self.root = root
        self.fake = fake
        self.config = config

    async def connect(self) -> Client:
        return Client(await trio.open_unix_socket(os.fspath(self.config.socket)))

    async def ask(self, obj: dict[str, Any] | bytes) -> list[dict[str, Any]]:
        client = await self.connect()
        await client.send(obj)
        return await client.all()


def write_config(root: Path, *, owner_uids: tuple[int, ...] = (UID,)) -> LoopdConfig:
    path = root / "loopd.toml"
    path.write_text(
        f'home = "{root / "home"}"\n'
        f'socket = "{root / "run" / "loop.sock"}"\n'
        f"owner_uids = [{', '.join(str(u) for u in owner_uids)}]\n"
        "[inference]\n"
        f'socket = "{root / "llama.sock"}"\n'
        "[broker]\n"
        f'socket = "{root / "no-brokerd" / "broker.sock"}"\n'
        "[loop]\n"
        'tools = ["echo"]\n'
    )
    return load_config(path)


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def start_loop(nursery: trio.Nursery, root: Path, turns: list[dict[str, Any]], *,
                     owner_uids: tuple[int, ...] = (UID,),
                     props: dict[str, Any] | None = None) -> Loop:
    fake = FakeLlamaServer({"props": props or PROPS, "turns": turns})
    await nursery.start(partial(fake.serve, unix_socket=root / "llama.sock"))
    config = write_config(root, owner_uids=owner_uids)
    await nursery.start(partial(serve, config))
    return Loop(root, fake, config)


async def test_status_after_the_self_test(tmp_path: Path, nursery: trio.Nursery) -> None:
    loop = await start_loop(nursery, tmp_path, [])
    [frame] = await loop.ask({"v": 1, "id": 4, "status": {}})
    status = frame["status"]
    assert frame["id"] == 4 and status["busy"] is False
    assert status["inference"]["ok"] is True and status["inference"]["slots"] == 4
    assert status["broker"]["ok"] is False  # nothing listens on broker.sock here
    assert "cannot be reached" in status["broker"]["reason"]


async def test_a_turn_is_streamed_then_done(tmp_path: Path, nursery: trio.Nursery) -> None:
    loop = await start_loop(nursery, tmp_path, [text_turn("hello there")])
    frames = await loop.ask(say(7))
    assert all(f["id"] == 7 for f in frames)
    texts = "".join(f["event"]["text"]["delta"] for f in frames[:-1])
    assert texts == "hello there"
    assert frames[-1]["done"]["finish"] == "stop"
    [summary] = (await loop.ask({"v": 1, "id": 8, "conversations": {}}))
    assert [c["name"] for c in summary["conversations"]["items"]] == ["c1"]
    [history] = await loop.ask({"v": 1, "id": 9, "history": {"conversation": "c1"}})
    roles = [m["role"] for m in history["history"]["messages"]]
    assert roles == ["user", "assistant"]


class TaskSteps(trio.abc.Instrument):
    """How many times each task ran (a step: from its resumption to its next yield),
    by the last part of its name."""

    def __init__(self) -> None:
        self.steps: Counter[str] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name.rsplit(".", 1)[-1]] += 1


async def test_the_writer_of_a_turn_runs_once_per_event(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    """Each event, paced as a model's are, wakes the shell's writer once: it writes
    the frame and waits for the next event in the same step (`send_frame_direct`
    takes no pass of the scheduler of its own; `send_frame` would run it twice per
    event). loopd's CPU per streamed event, docs/benchmarks.md."""
    words = 20
    steps: list[dict[str, Any]] = [{"role": "assistant"}]
    for number in range(words):
        steps += [{"sleep_s": 1}, {"text": f"w{number} "}]
    loop = await start_loop(nursery, tmp_path, [
        {"steps": [*steps, {"finish": "stop"}, {"usage": True}]}])
    counter = TaskSteps()
    trio.lowlevel.add_instrument(counter)
    try:
        frames = await loop.ask(say(7))
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert len(frames) == words + 1 and frames[-1]["done"]["finish"] == "stop", frames
    # one step per event, the first (to its first wait) and the last (the channel closed)
    assert counter.steps["write_events"] == words + 2, counter.steps


def slot_actions(fake: FakeLlamaServer) -> list[tuple[str, str]]:
    """The slot actions loopd asked for: (action, filename), in order."""
    return [(r.target.split("action=", 1)[1], json.loads(r.body)["filename"])
            for r in fake.requests if r.target.startswith("/slots/")]


async def test_a_new_conversation_keeps_the_slot_for_the_shared_prefix(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    # A restore of a file never saved fails, and llama-server empties the slot
    # on a failed restore: a new conversation must not ask for one, so that
    # cache_prompt re-uses the system message and tools already in the slot.
    loop = await start_loop(nursery, tmp_path, [text_turn("one"), text_turn("two"),
                                                text_turn("three")])
    for rid, conversation in ((1, "c1"), (2, "c2"), (3, "c1")):
        frames = await loop.ask(say(rid, conversation=conversation))
        assert frames[-1]["done"]["finish"] == "stop", frames
    assert slot_actions(loop.fake) == [
        ("save", "boxmaker-c1.bin"),
        ("save", "boxmaker-c2.bin"),
        ("restore", "boxmaker-c1.bin"),  # c1 has history: its own slot comes back
        ("save", "boxmaker-c1.bin"),
    ]


async def test_a_conversation_with_history_is_restored_after_a_restart(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    loop = await start_loop(nursery, tmp_path, [text_turn("one"), text_turn("two"),
                                                text_turn("three")])
    for rid, conversation in ((1, "old"), (2, "newest")):
        await loop.ask(say(rid, conversation=conversation))
    async with trio.open_nursery() as second:  # a second loopd on the same home
        loop.config.socket.unlink()
        await second.start(partial(serve, loop.config))
        frames = await loop.ask(say(3, conversation="old"))
        second.cancel_scope.cancel()
    assert frames[-1]["done"]["finish"] == "stop", frames
    assert slot_actions(loop.fake)[2:] == [
        ("restore", "boxmaker-newest.bin"),  # at start: the newest conversation
        ("restore", "boxmaker-old.bin"),
        ("save", "boxmaker-old.bin"),
    ]


async def test_a_second_say_is_busy_and_the_guard_is_released(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    loop = await start_loop(nursery, tmp_path, [text_turn("slow", pause_s=5), text_turn("next")])
    first = await loop.connect()
    await first.send(say(1))
    await trio.sleep(1)  # the first turn is waiting for its text
    assert await loop.ask(say(2, conversation="c2")) == [{"id": 2, "error": {
        "code": "busy", "message": "a turn is already running", "runbook": None}}]
    frames = await first.all()
    assert frames[-1]["done"]["finish"] == "stop"
    frames = await loop.ask(say(3))
    assert frames[-1]["done"]["finish"] == "stop"


async def test_bxctl_going_away_cancels_the_turn(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    loop = await start_loop(nursery, tmp_path, [text_turn("never read", pause_s=30),
                                                text_turn("after")])
    client = await loop.connect()
    await client.send(say(1))
    await trio.sleep(1)
    await client.stream.aclose()
    await trio.sleep(1)
    [frame] = await loop.ask({"v": 1, "id": 2, "status": {}})
    assert frame["status"]["busy"] is False
    # The fake notices at a write after its 30 s pause: the first write after
    # loopd's close may still succeed (the peer's reset is in flight), so wait
    # for the abort on the mock clock rather than for one fixed time.
    with trio.move_on_after(200):
        while loop.fake.stream_aborts < 1:
            await trio.sleep(1)
    assert loop.fake.stream_aborts == 1  # the inference stream was closed
    frames = await loop.ask(say(3))
    assert frames[-1]["done"]["finish"] == "stop"


async def test_an_event_too_large_for_a_frame_fails_the_turn(
        tmp_path: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer of the turn's frames checks each against the frame bound (shrunk
    here: each event's own bounds keep a real one within 8 MiB): the events before
    it are written, the turn fails `turn_failed`, the guard is released."""
    monkeypatch.setattr(_serve, "MAX_FRAME", 200)
    loop = await start_loop(nursery, tmp_path, [
        {"steps": [{"role": "assistant"}, {"text": "fits"}, {"text": "x" * 300},
                   {"finish": "stop"}, {"usage": True}]},
        text_turn("after"),
    ])
    frames = await loop.ask(say(7))
    assert frames[0] == {"id": 7, "event": {"text": {"delta": "fits"}}}, frames
    assert len(frames) == 2 and frames[1]["error"]["code"] == "turn_failed", frames
    assert frames[1]["error"]["message"].startswith("an event of "), frames
    monkeypatch.undo()
    frames = await loop.ask(say(8))
    assert frames[-1]["done"]["finish"] == "stop"


@pytest.mark.parametrize(("data", "reply"), [
    (b"not json", {"id": None, "error": {"code": "bad_frame", "runbook":
                                         "docs/runbook.md#bad-frame"}}),
    (b'{"v":1,"id":5,"status":{"x":1}}', {"id": 5, "error": {
        "code": "bad_frame", "runbook": "docs/runbook.md#bad-frame"}}),
    (b'{"v":2,"id":6,"status":{}}', {"id": 6, "error": {
        "code": "bad_version", "message": "v must be 1", "runbook": "docs/runbook.md#bad-frame"}}),
])
async def test_bad_frames_in_loop_socks_words(tmp_path: Path, nursery: trio.Nursery,
                                              data: bytes, reply: dict[str, Any]) -> None:
    loop = await start_loop(nursery, tmp_path, [])
    [frame] = await loop.ask(data)
    message = frame["error"].pop("message")
    if "message" in reply["error"]:
        assert message == reply["error"].pop("message")
    else:
        assert message.startswith("the frame does not decode: ")
    assert frame == reply


async def test_a_bad_header_and_a_silent_peer(tmp_path: Path, nursery: trio.Nursery,
                                              autojump_clock: trio.testing.MockClock) -> None:
    loop = await start_loop(nursery, tmp_path, [])
    client = await loop.connect()
    await client.stream.send_all(struct.pack(">I", 9 * 1024 * 1024))
    [frame] = await client.all()
    assert frame["id"] is None and frame["error"]["code"] == "bad_frame"
    assert frame["error"]["message"].startswith("the frame does not decode: frame length")
    silent = await loop.connect()
    before = trio.current_time()
    assert await silent.all() == []  # loop.sock closes a silent peer without an answer
    assert trio.current_time() - before == pytest.approx(10, abs=0.01)


async def test_another_uid_is_forbidden(tmp_path: Path, nursery: trio.Nursery) -> None:
    loop = await start_loop(nursery, tmp_path, [], owner_uids=(UID + 4242,))
    assert await loop.ask({"v": 1, "id": 1, "status": {}}) == [{"id": None, "error": {
        "code": "forbidden", "message": "this uid may not use loop.sock",
        "runbook": "docs/runbook.md#forbidden-peer"}}]


async def test_a_socket_path_it_refuses_fails_the_start(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir(mode=0o777)
    os.chmod(tmp_path / "run", 0o777)
    config = write_config(tmp_path)
    with pytest.raises(StartFailed, match=r"writable by group or others.*loopd-start-failed"):
        await serve(config)


async def test_an_inference_failure_is_answered_with_the_pointer_in_its_field(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    """02-wire: the message is the bare text; the pointer is the runbook field, once."""
    loop = await start_loop(nursery, tmp_path, [
        {"status": 500,
         "body": {"error": {"code": 500, "message": "boom", "type": "server_error"}}},
    ])
    frames = await loop.ask(say(7))
    assert frames[-1] == {"id": 7, "error": {
        "code": "inference_unavailable",
        "message": f"the inference server at unix:{tmp_path / 'llama.sock'} answered 500"
                   " Internal Server Error: server_error (500): boom",
        "runbook": "docs/runbook.md#inference-unavailable",
    }}


async def test_status_names_an_unreachable_server_with_its_pointer(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    loop = await start_loop(nursery, tmp_path, [])
    (tmp_path / "llama.sock").unlink()
    [frame] = await loop.ask({"v": 1, "id": 5, "status": {}})
    inference = frame["status"]["inference"]
    assert inference["ok"] is False
    assert inference["reason"] == (f"cannot connect to the inference server at"
                                   f" unix:{tmp_path / 'llama.sock'}: No such file or directory"
                                   " docs/runbook.md#inference-unavailable")


async def test_a_failed_start_answers_the_waiting_clients_then_stops(tmp_path: Path) -> None:
    """issue 22 item 18: a mismatch (as any self-test failure) is answered to the
    requests queued on loop.sock, within FAILED_START_ANSWER_S, before serve raises."""
    fake = FakeLlamaServer({"props": {**PROPS, "total_slots": 1}, "turns": []})
    config = write_config(tmp_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    (tmp_path / "run").mkdir(mode=0o700)
    listener.bind(os.fspath(config.socket))
    listener.listen(4)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(fake.serve, unix_socket=tmp_path / "llama.sock"))
            waiting = Client(await trio.open_unix_socket(os.fspath(config.socket)))
            await waiting.send(say(3))
            trio_listener = trio.socket.from_stdlib_socket(listener)
            failed = None
            with trio_listener:
                daemon = LoopDaemon.from_config(config)
                try:
                    await daemon.start_checks()
                except InferenceStartFailed as exc:
                    failed = exc
                    await answer_waiting_clients(trio_listener, config, exc.reason)
            nursery.cancel_scope.cancel()
    assert failed is not None
    assert await waiting.all() == [{"id": 3, "error": {
        "code": "inference_unavailable", "message": failed.reason,
        "runbook": "docs/runbook.md#inference-unavailable"}}]
    assert "slots: expected 4" in failed.reason
    assert failed.reason.endswith("docs/runbook.md#inference-mismatch")


async def test_a_server_that_stops_answering_health_fails_the_turn_in_10_s(
        tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    """The server went quiet after the start (its socket still queues connections):
    the turn's /health probe gives up after 10 s, not first_event_timeout_s."""
    autojump_clock.autojump_threshold = 0.05
    loop = await start_loop(nursery, tmp_path, [text_turn("never")])
    (tmp_path / "llama.sock").unlink()
    quiet = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    quiet.bind(os.fspath(tmp_path / "llama.sock"))
    quiet.listen(4)  # never accepts
    with quiet:
        started = trio.current_time()
        frames = await loop.ask(say(9))
    assert trio.current_time() - started < 11
    assert frames[-1]["error"]["code"] == "inference_unavailable"
    assert frames[-1]["error"]["runbook"] == "docs/runbook.md#inference-unavailable"
