"""The llama-server API layer: decoding the captures, and the client against the fake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.loopd._http import (
    Endpoint,
    InferenceHTTPError,
    InferenceProtocolError,
    InferenceStreamError,
    InferenceTimeout,
    Timeouts,
)
from boxmaker.loopd._llama import (
    ChatAssembler,
    ChatDelta,
    FinishDelta,
    LlamaClient,
    TextDelta,
    TimingsDelta,
    ToolCall,
    ToolCallDelta,
    UsageDelta,
    chat_request_body,
    decode_chunk,
    decode_props,
    decode_slot_action,
    decode_slots,
    describe_props,
)
from tests.fakes.llama_server import FakeLlamaServer, capture

Start = Callable[[dict[str, Any]], Awaitable[tuple[FakeLlamaServer, LlamaClient]]]
BODY = chat_request_body([{"role": "user", "content": "hi"}], model="local", slot=0,
                         temperature=0.7)


def body_of(name: str) -> bytes:
    return capture(name).split(b"\r\n\r\n", 1)[1]


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


# -- decoding (pure) ---------------------------------------------------------------------


def test_decode_props_capture() -> None:
    props = decode_props(body_of("props.http"))
    assert (props.total_slots, props.n_ctx, props.supports_tool_calls) == (2, 4096, False)
    assert props.model == "gemma-3-270m-q4_k_m.gguf"
    assert "2 slots, n_ctx 4096 per slot, tool calls: no" in describe_props(props)


def test_decode_props_tolerates_unknown_fields_but_not_bad_used_ones() -> None:
    props = json.loads(body_of("props.http"))
    props["a_future_field"] = {"x": [1, 2]}
    props["default_generation_settings"]["another"] = True
    assert decode_props(json.dumps(props).encode()).n_ctx == 4096
    for path, value in [(("total_slots",), "2"), (("total_slots",), 0),
                        (("default_generation_settings", "n_ctx"), 4096.0),
                        (("chat_template_caps", "supports_tool_calls"), 1),
                        (("default_generation_settings",), None)]:
        broken = json.loads(body_of("props.http"))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(InferenceProtocolError, match=path[-1]):
            decode_props(json.dumps(broken).encode())
    without_caps = json.loads(body_of("props.http"))
    del without_caps["chat_template_caps"]
    assert decode_props(json.dumps(without_caps).encode()).supports_tool_calls is None
    with pytest.raises(InferenceProtocolError, match="not valid JSON"):
        decode_props(b"{nope")


def test_decode_slots_and_slot_actions_captures() -> None:
    slots = decode_slots(body_of("slots.http"))
    assert [(s.id, s.n_ctx, s.is_processing) for s in slots] == [(0, 4096, False),
                                                                 (1, 4096, False)]
    saved = decode_slot_action("save", body_of("slot-save.http"))
    assert (saved.id_slot, saved.filename, saved.tokens, saved.ms) == (
        0, "conv-default.bin", 68, 1.05)
    restored = decode_slot_action("restore", body_of("slot-restore.http"))
    assert (restored.tokens, restored.ms) == (68, 0.549)
    assert decode_slot_action("save", body_of("slot-save-bad-slot.http")).id_slot == 7


def test_decode_chunk_kinds() -> None:
    text = ('{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"hi"}}],'
            '"object":"chat.completion.chunk","new_field":1}')
    assert decode_chunk(text) == [TextDelta(text="hi")]
    role = ('{"choices":[{"finish_reason":null,"index":0,'
            '"delta":{"role":"assistant","content":null}}]}')
    assert decode_chunk(role) == []
    with pytest.raises(InferenceStreamError):
        decode_chunk('{ "error": {"code": 500, "message": "x", "type": "server_error"}}')
    for bad in ['{"choices":[{"index":1,"delta":{}}]}', '{"choices":{}}',
                '{"choices":[{"index":0,"delta":{"content":5}}]}', "[1]", "nope",
                '{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{}}]}}]}',
                '{"choices":[],"usage":{"prompt_tokens":1}}']:
        with pytest.raises(InferenceProtocolError):
            decode_chunk(bad)


def test_assembler_rules() -> None:
    a = ChatAssembler()
    a.add(ToolCallDelta(index=0, id="c0", name="read_file", arguments='{"pa'))
    a.add(ToolCallDelta(index=0, id="c0", name=None, arguments='th": 1}'))  # same id again: ok
    with pytest.raises(InferenceProtocolError, match="different id"):
        a.add(ToolCallDelta(index=0, id="c9", name=None, arguments=""))
    with pytest.raises(InferenceProtocolError, match="finish_reason"):
        a.result()
    a.add(FinishDelta(reason="tool_calls"))
    assert a.result().tool_calls == (ToolCall(index=0, id="c0", name="read_file",
                                              arguments='{"path": 1}'),)
    b = ChatAssembler()
    b.add(ToolCallDelta(index=0, id=None, name=None, arguments="{}"))
    b.add(FinishDelta(reason="tool_calls"))
    with pytest.raises(InferenceProtocolError, match="no id or no function name"):
        b.result()


def test_chat_request_body() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    body = json.loads(chat_request_body([{"role": "user", "content": "hi"}], model="m", slot=2,
                                        temperature=0.5, tools=tools))
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                    "stream": True, "stream_options": {"include_usage": True}, "id_slot": 2,
                    "cache_prompt": True, "temperature": 0.5, "tools": tools}


# -- the client against the fake ---------------------------------------------------------------


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
        await client.wait_until_ready(600, poll_s=1)
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
