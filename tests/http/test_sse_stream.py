"""Streamed answers (open_sse) against the scripted fake llama-server (real sockets, in process)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._http import (
    MAX_ERROR_BODY,
    InferenceClosed,
    InferenceHTTPError,
    InferenceProtocolError,
    InferenceStreamError,
    InferenceTimeout,
    Timeouts,
)
from boxmaker._http._sse_stream import open_sse
from tests.fakes.sse_client import (
    BODY,
    CHAT,
    LONG,
    bare_and_pointed,
    collect,
    expected_events,
)

# -- replays of the real captures -----------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["chat-stream-text.http", "chat-stream-usage.http", "chat-stream-toolcalls-parallel.http"],
)
@pytest.mark.parametrize("split", ["chunks", "whole", "bytes", [7, 300, 1]])
async def test_replay_delivers_every_event_then_ends(serve: Any, name: str, split: Any) -> None:
    fake, endpoint = await serve({"turns": [{"replay": name, "split": split}]})
    with trio.fail_after(30):
        events = await collect(endpoint)
    assert events == expected_events(name)
    assert fake.chat_bodies == [json.loads(BODY)]
    headers = dict(fake.requests[0].headers)
    assert headers[b"content-length"] == str(len(BODY)).encode()
    assert headers[b"content-type"] == b"application/json"
    assert fake.stream_aborts == 0
    assert fake.eof_before_done == 0  # never a half-close


async def test_each_event_is_delivered_before_the_next_chunk_is_sent(serve: Any,
                                                                     autojump_clock: Any) -> None:
    # with 10 s between chunks, the n-th event arrives at 10*(n-1) s: no buffering
    _, endpoint = await serve({"turns": [{"replay": "chat-stream-text.http", "delay_s": 10}]})
    start = trio.current_time()
    arrivals = []
    with trio.fail_after(1000):
        async with open_sse(endpoint, CHAT, BODY, timeouts=LONG) as stream:
            async for _ in stream:
                arrivals.append(round(trio.current_time() - start))
    # the first chunk holds two events; then one event per chunk
    assert arrivals[:4] == [10, 10, 20, 30]


@pytest.mark.parametrize("split", ["chunks", "whole", "bytes"])
async def test_midstream_error_event_is_raised_after_earlier_events(serve: Any,
                                                                    split: str) -> None:
    _, endpoint = await serve({"turns": [{"replay": "chat-stream-toolcall-error.http",
                                          "split": split}]})
    events = []
    with trio.fail_after(30), pytest.raises(InferenceStreamError) as info:
        async with open_sse(endpoint, CHAT, BODY, timeouts=LONG) as stream:
            async for event in stream:
                events.append(event)
    assert len(events) == len(expected_events("chat-stream-toolcall-error.http")) - 1
    assert info.value.error is not None
    assert info.value.error["type"] == "server_error"
    assert "peg-native" in info.value.message and bare_and_pointed(info.value)


async def test_older_error_line_form_is_raised(serve: Any) -> None:
    script = {"turns": [{"steps": [{"text": "a"}, {"error_line": {
        "code": 500, "message": "boom \x1b[31m", "type": "server_error"}}]}]}
    _, endpoint = await serve(script)
    with trio.fail_after(30), pytest.raises(InferenceStreamError) as info:
        await collect(endpoint)
    assert info.value.error == {"code": 500, "message": "boom \x1b[31m", "type": "server_error"}
    assert "\x1b" not in info.value.message and "boom \\u{001B}[31m" in info.value.message


async def test_stream_without_done_is_an_error(serve: Any) -> None:
    _, endpoint = await serve({"turns": [{"steps": [{"text": "a"}, {"finish": "stop"}],
                                          "done": False}]})
    with trio.fail_after(30), pytest.raises(InferenceClosed, match=r"without data: \[DONE\]"):
        await collect(endpoint)


@pytest.mark.parametrize("end", ["chunked", "close"])
async def test_disconnect_between_chunks_is_an_error(serve: Any, end: str) -> None:
    _, endpoint = await serve({"turns": [{"steps": [{"text": "a"}, {"disconnect": True}],
                                          "end": end}]})
    with trio.fail_after(30), pytest.raises(InferenceClosed) as info:
        await collect(endpoint)
    assert bare_and_pointed(info.value)


async def test_close_mid_chunk_is_an_error(serve: Any) -> None:
    _, endpoint = await serve({"turns": [{"steps": [
        {"text": "a"}, {"close_mid_chunk": 'data: {"choices": [{"delta'}]}]})
    with trio.fail_after(30), pytest.raises(InferenceClosed, match="closed the connection"):
        await collect(endpoint)


@pytest.mark.parametrize("cut", [200, 600, 700, 7100])
async def test_truncated_capture_is_an_error(serve: Any, cut: int) -> None:
    _, endpoint = await serve({"turns": [{"replay": "chat-stream-text.http", "truncate": cut}]})
    with trio.fail_after(30), pytest.raises(InferenceClosed):
        await collect(endpoint)


# -- errors before the stream ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [("chat-error-400.http", "invalid_request_error"),
     ("chat-error-context.http", "exceed_context_size_error")],
)
async def test_400_with_json_body(serve: Any, name: str, kind: str) -> None:
    _, endpoint = await serve({"turns": [{"replay": name}]})
    with trio.fail_after(30), pytest.raises(InferenceHTTPError) as info:
        await collect(endpoint)
    assert info.value.status == 400
    assert info.value.error_type == kind
    assert info.value.error is not None and info.value.error["code"] == 400
    assert bare_and_pointed(info.value)
    if kind == "exceed_context_size_error":
        assert info.value.error["n_ctx"] == 4096


async def test_html_error_body_is_escaped_and_truncated(serve: Any) -> None:
    html = "<html><body>\x1b]0;pwned\x07 Bad Gateway" + "x" * 5000 + "</body></html>"
    _, endpoint = await serve({"turns": [{"status": 502, "body": html,
                                          "content_type": "text/html"}]})
    with trio.fail_after(30), pytest.raises(InferenceHTTPError) as info:
        await collect(endpoint)
    assert info.value.status == 502 and info.value.error is None
    assert "\x1b" not in info.value.message and "\x07" not in info.value.message
    assert "Bad Gateway" in info.value.message
    assert len(info.value.message) < 600
    assert info.value.text == html


async def test_oversized_error_body_with_length(serve: Any) -> None:
    _, endpoint = await serve({"turns": [{"status": 500, "body": "e" * (MAX_ERROR_BODY + 1),
                                          "content_type": "text/plain"}]})
    with trio.fail_after(30), pytest.raises(InferenceHTTPError, match="more than the 65536"):
        await collect(endpoint)


async def test_oversized_chunked_error_body(serve: Any) -> None:
    head = ("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
            "Transfer-Encoding: chunked\r\n\r\n")
    steps = [{"raw": "e" * 30000}] * 3
    _, endpoint = await serve({"turns": [{"head": head, "steps": steps, "done": False}]})
    with trio.fail_after(30), pytest.raises(InferenceHTTPError, match="larger than the 65536"):
        await collect(endpoint)


async def test_not_an_event_stream(serve: Any) -> None:
    _, endpoint = await serve({"turns": [{"replay": "chat-nostream.http"}]})
    with trio.fail_after(30), pytest.raises(InferenceProtocolError, match="not text/event-stream"):
        await collect(endpoint)


async def test_garbage_instead_of_http(serve: Any) -> None:
    _, endpoint = await serve({"turns": [{"head": "SMTP ready\r\n\r\n", "steps": []}]})
    with trio.fail_after(30), pytest.raises(InferenceProtocolError, match="bad HTTP"):
        await collect(endpoint)


# -- timeouts (mock clock) ----------------------------------------------------------


async def test_first_event_timeout_fires_on_time(serve: Any, autojump_clock: Any) -> None:
    _, endpoint = await serve({"turns": [{"head_delay_s": 1000, "steps": [{"text": "a"}]}]})
    start = trio.current_time()
    with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
        await collect(endpoint, Timeouts(first_event_s=300, idle_s=60))
    assert info.value.phase == "first_event"
    assert trio.current_time() - start == pytest.approx(300)
    assert bare_and_pointed(info.value)


async def test_first_event_timeout_covers_a_head_without_events(serve: Any,
                                                                autojump_clock: Any) -> None:
    # head at once, then only pings: the first *event* never comes
    _, endpoint = await serve({"turns": [{"steps": [{"pings": {"every_s": 20, "count": 100}}]}]})
    start = trio.current_time()
    with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
        await collect(endpoint, Timeouts(first_event_s=300, idle_s=60))
    assert info.value.phase == "first_event"
    assert trio.current_time() - start == pytest.approx(300)


async def test_idle_timeout_fires_on_time(serve: Any, autojump_clock: Any) -> None:
    _, endpoint = await serve({"turns": [{"steps": [
        {"text": "a"}, {"sleep_s": 5}, {"text": "b"}, {"sleep_s": 1000}, {"text": "c"}]}]})
    start = trio.current_time()
    got = []
    with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
        async with open_sse(endpoint, CHAT, BODY, timeouts=Timeouts(idle_s=60)) as stream:
            async for event in stream:
                got.append(event)
    assert info.value.phase == "idle"
    assert len(got) == 2
    assert trio.current_time() - start == pytest.approx(65)


async def test_pings_reset_the_idle_timer(serve: Any, autojump_clock: Any) -> None:
    _, endpoint = await serve({"turns": [{"steps": [
        {"text": "a"}, {"pings": {"every_s": 50, "count": 6}}, {"text": "b"}]}]})
    with trio.fail_after(5000):
        async with open_sse(endpoint, CHAT, BODY, timeouts=Timeouts(idle_s=60)) as stream:
            events = [event async for event in stream]
            assert stream.pings == 6
    assert len(events) == 2


async def test_total_timeout_fires_on_time(serve: Any, autojump_clock: Any) -> None:
    _, endpoint = await serve({"turns": [{"steps": [
        {"text": "a"}, {"pings": {"every_s": 30, "count": 100}}]}]})
    start = trio.current_time()
    with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
        await collect(endpoint, Timeouts(idle_s=60, total_s=200))
    assert info.value.phase == "total"
    assert trio.current_time() - start == pytest.approx(200)


async def test_cancelling_closes_the_connection(serve: Any, autojump_clock: Any) -> None:
    fake, endpoint = await serve({"turns": [{"steps": [
        {"text": "a"}, {"sleep_s": 10}, {"text": "b"}, {"sleep_s": 10}, {"text": "c"}]}]})
    with trio.fail_after(5000):
        with trio.move_on_after(5):
            async with open_sse(endpoint, CHAT, BODY, timeouts=LONG) as stream:
                async for _ in stream:
                    pass
        while fake.stream_aborts == 0:  # the fake notices at its next write
            await trio.sleep(1)
    assert trio.current_time() < 20




async def test_done_and_error_found_among_plain_events_of_one_read(serve: Any) -> None:
    # several events in one chunk: the fast path must still see [DONE] and errors
    _, endpoint = await serve({"turns": [{"steps": [{"events": [
        {"text": "a"}, {"text": "b"}, {"raw": "data: [DONE]\n\n"}, {"text": "never"}]}],
        "done": False}]})
    with trio.fail_after(30):
        events = await collect(endpoint)
    assert [json.loads(e.data or "")["choices"][0]["delta"]["content"] for e in events] == [
        "a", "b"]


async def test_error_found_among_plain_events_of_one_read(serve: Any) -> None:
    _, endpoint = await serve({"turns": [{"steps": [{"events": [
        {"text": "a"}, {"raw": 'data: {"error": {"code": 500, "message": "m"}}\n\n'}]}]}]})
    with trio.fail_after(30), pytest.raises(InferenceStreamError):
        await collect(endpoint)
