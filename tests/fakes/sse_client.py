"""Reading the fake llama-server with the shared client (boxmaker._http), for its tests."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from boxmaker._error_table import pointer_of
from boxmaker._http import Endpoint, InferenceError, Timeouts
from boxmaker._http._sse import SSEEvent, SSEParser
from boxmaker._http._sse_stream import open_sse
from tests.fakes.llama_server import FakeLlamaServer, capture_body

RUNBOOK = "docs/runbook.md#inference-unavailable"
CHAT = "/v1/chat/completions"
BODY = json.dumps({"model": "local", "stream": True, "messages": []}).encode()
LONG = Timeouts(connect_s=10, first_event_s=300, idle_s=60, total_s=None)


def bare_and_pointed(error: InferenceError) -> bool:
    """The message carries no pointer; the error table gives it, and str() shows it."""
    return (RUNBOOK not in error.message and pointer_of(error) == RUNBOOK
            and str(error) == f"{error.message} {RUNBOOK}")

Start = Callable[[dict[str, Any]], Awaitable[tuple[FakeLlamaServer, Endpoint]]]


async def collect(endpoint: Endpoint, timeouts: Timeouts = LONG) -> list[SSEEvent]:
    events = []
    async with open_sse(endpoint, CHAT, BODY, timeouts=timeouts) as stream:
        async for event in stream:
            events.append(event)
    return events


def expected_events(name: str) -> list[SSEEvent]:
    events = SSEParser().feed(capture_body(name))  # checked against an oracle in test_sse
    return [e for e in events if e.data != "[DONE]"]
