"""The llama-server decoding (pure): the captures, the strict used fields, the assembler."""

from __future__ import annotations

import json

import pytest

from boxmaker._http._errors import InferenceProtocolError, InferenceStreamError
from boxmaker._http._llama_api import (
    FinishDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    chat_request_body,
)
from boxmaker._http._llama_decode import (
    ChatAssembler,
    decode_chunk,
    decode_props,
    decode_slot_action,
    decode_slots,
    describe_props,
)
from tests.fakes.llama_server import capture


def body_of(name: str) -> bytes:
    return capture(name).split(b"\r\n\r\n", 1)[1]


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
