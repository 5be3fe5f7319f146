"""boxmaker/_http/_llama_api.py: the chat request body as 06-loopd builds it."""

from __future__ import annotations

import json

from boxmaker._http._llama_api import CHAT_PATH, chat_request_body

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hé"}]


def test_the_body_streams_with_usage_on_its_slot_and_caches_the_prompt() -> None:
    body = json.loads(chat_request_body(MESSAGES, model="m", slot=2, temperature=0.2))
    assert body == {
        "model": "m", "messages": MESSAGES, "stream": True,
        "stream_options": {"include_usage": True}, "id_slot": 2,
        "cache_prompt": True, "temperature": 0.2,
    }
    assert CHAT_PATH == "/v1/chat/completions"


def test_tools_and_max_tokens_appear_only_when_given() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    body = json.loads(chat_request_body(MESSAGES, model="m", slot=0, temperature=0.0,
                                        tools=tools, max_tokens=64))
    assert body["tools"] == tools and body["max_tokens"] == 64
    bare = json.loads(chat_request_body(MESSAGES, model="m", slot=0, temperature=0.0, tools=()))
    assert "tools" not in bare and "max_tokens" not in bare


def test_the_body_is_utf8_json_of_the_messages_in_order() -> None:
    raw = chat_request_body(tuple(MESSAGES), model="m", slot=0, temperature=1.0)
    assert isinstance(raw, bytes)
    assert json.loads(raw.decode("utf-8"))["messages"] == MESSAGES
