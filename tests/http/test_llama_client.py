"""The llama-server client against the fake llama-server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._http import (
    ChatDelta,
    Endpoint,
    FinishDelta,
    InferenceHTTPError,
    InferenceStreamError,
    InferenceTimeout,
    TextDelta,
    Timeouts,
    TimingsDelta,
    ToolCall,
    ToolCallDelta,
    UsageDelta,
    chat_request_body,
)
from boxmaker._http.client import LlamaClient
from tests.fakes.llama_server import FakeLlamaServer, capture

Start = Callable[[dict[str, Any]], Awaitable[tuple[FakeLlamaServer, LlamaClient]]]
BODY = chat_request_body([{"role": "user", "content": "hi"}], model="local", slot=0,
                         temperature=0.7)


@pytest.fixture
async def start(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Start]:
    async def run(script: dict[str, Any]) -> tuple[FakeLlamaServer, LlamaClient]:
        fake = FakeLlamaServer(script)
        endpoint = await nursery.start(partial(fake.serve, unix_socket=tmp_path / "l.sock"))
        return fake, LlamaClient(endpoint, timeouts=Timeouts(first_event_s=300, idle_s=60))

    yield run


async def run_chat(client: LlamaClient) -> tuple[list[ChatDelta], Any]:
    deltas: list[ChatDelta] = []
    with trio.fail_after(30):
        async with client.chat(BODY) as stream:
            async for delta in stream:
                deltas.append(delta)
    return deltas, stream.result()


async def test_parallel_tool_calls_assembled_from_the_capture(start: Start) -> None:
    fake, client = await start({"turns": [{"replay": "chat-stream-toolcalls-parallel.http"}]})
    deltas, result = await run_chat(client)
    assert [c.index for c in result.tool_calls] == [0, 1, 2]
    assert [c.id for c in result.tool_calls] == ["etqYG3PyCpb34eJTM1aaNI9rKF6Kbs1P",
                                                "g4zZSKTUbiAA3eSGvn8u09e68oI3kdnU",
                                                "sEGkfhHpwY4ROQzOt93lTaoPhBgOrnLR"]
    assert {c.name for c in result.tool_calls} == {"read_file"}
    assert result.tool_calls[0].arguments == '{"path": "/home/me/notes/todo.md"}'
    assert result.tool_calls[1].arguments == '{"path": "/home/me/notes/todo.md"}'
    assert result.tool_calls[2].arguments == '{"path":'
    assert result.finish_reason == "length"
    assert result.usage is not None and result.usage.completion_tokens == 60
    assert result.timings is not None and result.timings.cache_n == 249
    assert sum(isinstance(d, ToolCallDelta) for d in deltas) > 3
    assert fake.chat_bodies[0]["stream_options"] == {"include_usage": True}


async def test_usage_from_the_final_event_of_the_usage_capture(start: Start) -> None:
    _, client = await start({"turns": [{"replay": "chat-stream-usage.http"}]})
    deltas, result = await run_chat(client)
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens,
            result.usage.total_tokens, result.usage.cached_tokens) == (27, 8, 35, 1)
    assert result.timings is not None and (result.timings.cache_n, result.timings.prompt_n,
                                           result.timings.predicted_n) == (1, 26, 8)
    assert result.text == "Name three colours.<|im_end"
    assert result.tool_calls == () and result.finish_reason == "length"
    kinds = [type(d) for d in deltas]
    assert kinds[-3:] == [FinishDelta, UsageDelta, TimingsDelta]


async def test_text_capture_timings_without_usage(start: Start) -> None:
    _, client = await start({"turns": [{"replay": "chat-stream-text.http", "split": "bytes"}]})
    _, result = await run_chat(client)
    assert result.usage is None
    assert result.timings is not None and result.timings.predicted_n == 24
    assert result.text.startswith("Name three colours.")


async def test_midstream_error_keeps_what_came(start: Start) -> None:
    _, client = await start({"turns": [{"replay": "chat-stream-toolcall-error.http"}]})
    with trio.fail_after(30), pytest.raises(InferenceStreamError) as info:
        async with client.chat(BODY) as stream:
            async for _ in stream:
                pass
    assert info.value.error is not None and info.value.error["code"] == 500
    [partial] = stream.assembler.partial_tool_calls()  # what came is still there
    assert (partial.index, partial.id, partial.name) == (
        0, "UHR429esq3IbVgYFKr8uIkYkLUxNfL1j", "read_file")
    assert partial.arguments.startswith('{"path": "/home/me/no_notes/todo.md", "type"')
    assert partial.arguments.endswith('"required": ["path')
    assert stream.assembler.text == ""


async def test_scripted_tool_call_fragments(start: Start) -> None:
    _, client = await start({"turns": [{"steps": [
        {"role": "assistant"}, {"text": "Let me look."},
        {"tool_call": {"index": 0, "id": "call_a", "name": "list_dir",
                       "arguments": ["{\"pa", "th\": \"/tmp\"", "}"]}},
        {"tool_call": {"index": 1, "id": "call_b", "name": "read_file",
                       "arguments": ["{\"path\": \"/etc/hostname\"}"]}},
        {"finish": "tool_calls"}, {"usage": True}]}]})
    deltas, result = await run_chat(client)
    assert result.finish_reason == "tool_calls"
    assert result.text == "Let me look."
    assert result.tool_calls == (
        ToolCall(index=0, id="call_a", name="list_dir", arguments='{"path": "/tmp"}'),
        ToolCall(index=1, id="call_b", name="read_file", arguments='{"path": "/etc/hostname"}'))
    assert deltas[0] == TextDelta(text="Let me look.")


async def test_health_and_wait_through_loading(start: Start, autojump_clock: Any) -> None:
    fake, client = await start({"health": {"loading": 3}})
    begin = trio.current_time()
    with trio.fail_after(100):
        assert await client.wait_until_ready(600, poll_s=2) == 3
    assert fake.health_polls == 4
    assert trio.current_time() - begin == pytest.approx(6)


async def test_loading_past_the_timeout(start: Start, autojump_clock: Any) -> None:
    _, client = await start({"health": {"loading": -1}})
    begin = trio.current_time()
    with trio.fail_after(1000), pytest.raises(InferenceTimeout, match="still loading"):
        await client.wait_until_ready(600, poll_s=10)  # 60 polls, not 600
    assert trio.current_time() - begin == pytest.approx(600)


async def test_health_other_error_is_raised(nursery: trio.Nursery) -> None:
    async def answer(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(capture("chat-error-400.http"))
        await stream.aclose()

    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    nursery.start_soon(trio.serve_listeners, answer, [listener])
    client = LlamaClient(Endpoint.tcp("127.0.0.1", listener.socket.getsockname()[1]))
    with trio.fail_after(30), pytest.raises(InferenceHTTPError) as info:
        await client.health()
    assert info.value.status == 400


async def test_props_and_slots(start: Start) -> None:
    _, client = await start({"props": {"total_slots": 3, "n_ctx": 8192,
                                       "supports_tool_calls": True}})
    with trio.fail_after(30):
        props = await client.props()
        slots = await client.slots()
    assert (props.total_slots, props.n_ctx, props.supports_tool_calls) == (3, 8192, True)
    assert [s.id for s in slots] == [0, 1, 2] and {s.n_ctx for s in slots} == {8192}


async def test_slot_save_restore_erase(start: Start) -> None:
    fake, client = await start({"props": {"total_slots": 4}})
    with trio.fail_after(30):
        with pytest.raises(InferenceHTTPError) as info:
            await client.restore_slot(0, "conv-a.bin")
        assert info.value.status == 400 and "Unable to restore slot" in info.value.message
        saved = await client.save_slot(0, "conv-a.bin")
        restored = await client.restore_slot(0, "conv-a.bin")
        wrapped = await client.save_slot(7, "x.bin")
        erased = await client.erase_slot(1)
    assert (saved.id_slot, saved.filename, saved.tokens) == (0, "conv-a.bin", 68)
    assert restored.tokens == 68
    assert wrapped.id_slot == 3
    assert erased.tokens == 68
    targets = [r.target for r in fake.requests]
    assert targets == ["/slots/0?action=restore", "/slots/0?action=save",
                       "/slots/0?action=restore", "/slots/7?action=save",
                       "/slots/1?action=erase"]
    assert json.loads(fake.requests[1].body) == {"filename": "conv-a.bin"}


async def test_fake_default_turn_after_the_scripted_ones(start: Start) -> None:
    _, client = await start({"turns": [{"steps": [{"text": "one"}, {"finish": "stop"}]}],
                             "default_turn": {"steps": [{"text": "again"}, {"finish": "stop"}]}})
    texts = [(await run_chat(client))[1].text for _ in range(3)]
    assert texts == ["one", "again", "again"]
