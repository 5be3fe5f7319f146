"""boxmaker/_http/_fetch.py: one small exchange on a real socket, any status, bounded.

Against raw servers that send exact bytes, and against the fake llama-server
(the `serve` fixture of tests/http/conftest.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._http._connection import HttpConnection
from boxmaker._http._endpoint import Endpoint
from boxmaker._http._error_answers import MAX_ERROR_BODY
from boxmaker._http._errors import (
    BodyTooLarge,
    InferenceHTTPError,
    InferenceProtocolError,
    InferenceTimeout,
)
from boxmaker._http._fetch import fetch, read_error

Serve = Callable[[bytes], Awaitable[tuple[Endpoint, list[bytes]]]]


def answer(status: str, body: bytes, *, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\nConnection: close\r\n\r\n").encode() + body


@pytest.fixture(params=["tcp", "unix"])
def raw_server(request: pytest.FixtureRequest, nursery: trio.Nursery, tmp_path: Path) -> Serve:
    """A real server that records each request and sends `reply` (b"": say nothing)."""

    async def start(reply: bytes) -> tuple[Endpoint, list[bytes]]:
        requests: list[bytes] = []

        async def handle(stream: trio.abc.Stream) -> None:
            received = b""
            while b"\r\n\r\n" not in received:
                data = await stream.receive_some(65536)
                if not data:
                    return
                received += data
            requests.append(received)
            if not reply:
                await trio.sleep_forever()
            await stream.send_all(reply)
            await stream.aclose()

        if request.param == "unix":
            path = tmp_path / "s.sock"
            sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
            await sock.bind(str(path))
            sock.listen()
            listeners = [trio.SocketListener(sock)]
            endpoint = Endpoint.unix(path)
        else:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            endpoint = Endpoint.tcp("127.0.0.1", port)
        nursery.start_soon(trio.serve_listeners, handle, listeners)
        return endpoint, requests

    return start


async def test_a_200_answer_is_read_whole(raw_server: Serve) -> None:
    endpoint, requests = await raw_server(answer("200 OK", b'{"status":"ok"}'))
    with trio.fail_after(10):
        response = await fetch(endpoint, "GET", "/health")
    assert response.status == 200 and response.body == b'{"status":"ok"}'
    assert response.head.content_type == "application/json"
    head = requests[0].lower()
    assert head.startswith(b"get /health http/1.1\r\n")
    assert b"connection: close" in head and b"content-type" not in head


async def test_a_body_is_sent_with_its_content_type(raw_server: Serve) -> None:
    endpoint, requests = await raw_server(answer("200 OK", b"{}"))
    with trio.fail_after(10):
        await fetch(endpoint, "POST", "/slots/0?action=save", body=b'{"filename":"a"}')
    head = requests[0].lower()
    assert head.startswith(b"post /slots/0?action=save http/1.1\r\n")
    assert b"content-type: application/json" in head


async def test_any_other_status_is_returned_not_raised(raw_server: Serve) -> None:
    endpoint, _ = await raw_server(answer("503 Service Unavailable", b'{"error":{"code":503}}'))
    with trio.fail_after(10):
        response = await fetch(endpoint, "GET", "/health")
    assert response.status == 503 and response.body == b'{"error":{"code":503}}'


async def test_a_200_body_over_the_limit_is_refused(raw_server: Serve) -> None:
    endpoint, _ = await raw_server(answer("200 OK", b"x" * 2000))
    with trio.fail_after(10), pytest.raises(BodyTooLarge, match="larger than 1000 bytes"):
        await fetch(endpoint, "GET", "/props", max_body=1000)


async def test_an_error_body_announced_too_long_is_refused_unread(raw_server: Serve) -> None:
    endpoint, _ = await raw_server(answer("500 Oops", b"", length=MAX_ERROR_BODY + 1))
    with trio.fail_after(10), pytest.raises(InferenceHTTPError) as caught:
        await fetch(endpoint, "GET", "/props")
    assert caught.value.status == 500
    assert f"of {MAX_ERROR_BODY + 1} bytes" in caught.value.message


async def test_an_error_body_longer_than_it_may_be_is_refused(raw_server: Serve) -> None:
    chunked = (b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n" % (MAX_ERROR_BODY + 10) + b"y" * (MAX_ERROR_BODY + 10)
               + b"\r\n0\r\n\r\n")
    endpoint, _ = await raw_server(chunked)
    with trio.fail_after(10), pytest.raises(InferenceHTTPError) as caught:
        await fetch(endpoint, "GET", "/props")
    assert "larger than the" in caught.value.message and caught.value.status == 500


async def test_a_silent_server_takes_the_whole_timeout(
        raw_server: Serve, autojump_clock: trio.testing.MockClock) -> None:
    endpoint, requests = await raw_server(b"")
    start = trio.current_time()
    with trio.fail_after(100), pytest.raises(InferenceTimeout) as caught:
        await fetch(endpoint, "GET", "/health", timeout_s=5.0)
    assert caught.value.phase == "total"
    assert trio.current_time() - start == pytest.approx(5.0)
    assert "longer than 5.0 s for the whole request" in caught.value.message
    assert len(requests) == 1


async def test_read_error_types_a_non_200_answer(raw_server: Serve) -> None:
    body = b'{"error":{"type":"unavailable_error","code":503,"message":"Loading model"}}'
    endpoint, _ = await raw_server(answer("503 Service Unavailable", body))
    with trio.fail_after(10):
        async with await HttpConnection.open(endpoint) as conn:
            await conn.send_request("GET", "/health", headers=[("Connection", "close")])
            error = await read_error(conn, await conn.receive_head())
    assert error.status == 503 and error.error_type == "unavailable_error"
    assert "Loading model" in error.message


async def test_read_error_refuses_an_announced_huge_body(raw_server: Serve) -> None:
    endpoint, _ = await raw_server(answer("502 Bad", b"", length=10 * MAX_ERROR_BODY))
    with trio.fail_after(10):
        async with await HttpConnection.open(endpoint) as conn:
            await conn.send_request("GET", "/health", headers=[("Connection", "close")])
            error = await read_error(conn, await conn.receive_head())
    assert error.status == 502 and error.text == ""
    assert f"of {10 * MAX_ERROR_BODY} bytes" in error.message


# -- against the fake llama-server ------------------------------------------------


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
