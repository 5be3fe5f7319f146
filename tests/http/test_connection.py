"""The h11/trio connection and fetch against the fake llama-server and raw servers."""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._http import (
    MAX_ERROR_BODY,
    Endpoint,
    InferenceHTTPError,
    InferenceProtocolError,
    InferenceTimeout,
    InferenceUnavailable,
    Timeouts,
)
from boxmaker._http.client import HttpConnection, fetch
from tests.fakes.sse_client import BODY, bare_and_pointed, collect


async def test_connection_refused(tmp_path: Path) -> None:
    with trio.fail_after(30), pytest.raises(InferenceUnavailable) as info:
        await collect(Endpoint.unix(tmp_path / "missing.sock"))
    assert "cannot connect" in info.value.message and bare_and_pointed(info.value)


async def test_connect_timeout_fires_on_time(autojump_clock: Any) -> None:
    # a listener that never accepts, with its backlog full: the next connect hangs
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    port = listener.getsockname()[1]
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        start = trio.current_time()
        with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
            await collect(Endpoint.tcp("127.0.0.1", port), Timeouts(connect_s=10))
        assert info.value.phase == "connect"
        assert trio.current_time() - start == pytest.approx(10)
    finally:
        for s in [*fillers, listener]:
            s.close()


async def test_fake_counts_a_half_close(serve: Any) -> None:
    # the control for "never a half-close": a client that does one is seen
    fake, endpoint = await serve({"turns": [{"steps": [{"sleep_s": 0.05}, {"text": "a"}]}]})
    with trio.fail_after(30):
        conn = await HttpConnection.open(endpoint)
        async with conn:
            await conn.send_request("POST", "/v1/chat/completions", body=BODY)
            await conn._stream.send_eof()  # type: ignore[attr-defined]
            while fake.stream_aborts == 0:
                await trio.sleep(0.01)


# -- fetch -----------------------------------------------------------------------------


async def test_fetch_reads_any_status(serve: Any) -> None:
    fake, endpoint = await serve({"health": {"loading": 1}})
    with trio.fail_after(30):
        first = await fetch(endpoint, "GET", "/health")
        second = await fetch(endpoint, "GET", "/health")
    assert first.status == 503 and b"Loading model" in first.body
    assert second.status == 200 and json.loads(second.body) == {"status": "ok"}
    assert fake.health_polls == 2


async def test_fetch_total_timeout(autojump_clock: Any, nursery: trio.Nursery) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    nursery.start_soon(trio.serve_listeners, silent, [listener])
    start = trio.current_time()
    with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
        await fetch(Endpoint.tcp("127.0.0.1", port), "GET", "/props", timeout_s=30)
    assert info.value.phase == "total"
    assert trio.current_time() - start == pytest.approx(30)


def test_endpoint_from_url() -> None:
    assert Endpoint.from_url("http://127.0.0.1:8080") == Endpoint.tcp("127.0.0.1", 8080)
    assert Endpoint.from_url("http://gpu-box:8080/").host_header == "gpu-box:8080"
    assert Endpoint.from_url("http://[::1]:9").host_header == "[::1]:9"
    for bad in ["https://x:1", "http://x:1/v1", "ftp://x", "http://:80", "http://x:99999"]:
        with pytest.raises(ValueError):
            Endpoint.from_url(bad)



async def test_fetch_refuses_a_body_over_its_limit(serve: Any) -> None:
    _, endpoint = await serve({"props": {"total_slots": 8}})
    with trio.fail_after(30), pytest.raises(InferenceProtocolError, match="larger than 1000"):
        await fetch(endpoint, "GET", "/slots", max_body=1000)
    with trio.fail_after(30):
        assert (await fetch(endpoint, "GET", "/slots")).status == 200


async def test_fetch_error_body_over_the_limit(serve: Any) -> None:
    _, endpoint = await serve({"turns": [
        {"status": 500, "body": "e" * (MAX_ERROR_BODY + 1), "content_type": "text/plain"},
        {"head": "HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n",
         "steps": [{"raw": "e" * 40000}, {"raw": "e" * 40000}], "done": False}]})
    for match in ["more than the 65536", "larger than the 65536"]:
        with trio.fail_after(30), pytest.raises(InferenceHTTPError, match=match):
            await fetch(endpoint, "POST", "/v1/chat/completions", body=b"{}")
