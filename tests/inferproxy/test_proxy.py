"""inferproxy's forwarding, through real sockets: a Unix socket in front, TCP behind.

The server behind is `tests.fakes.http_upstream.HttpUpstream`: h11 reads each
request, and every test writes the answer's raw bytes itself, waiting on
events the test controls where the order of things is the point.
"""

from __future__ import annotations

import logging
import socket
import struct
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import h11
import pytest
import trio
import trio.testing

from boxmaker._http import Endpoint, InferenceClosed
from boxmaker._http.client import HttpConnection, fetch
from boxmaker.inferproxy._config import Upstream
from boxmaker.inferproxy._proxy import ProxySettings
from boxmaker.inferproxy._serve import bind_listener, serve
from boxmaker.proto._json import loads_object
from tests.fakes.http_upstream import (
    LAST_CHUNK,
    HttpUpstream,
    Received,
    Respond,
    answer_ok,
    chunk,
    data_event,
    json_answer,
    sse_head,
)

KEY = "sk-test-7f3a9c2e5b1d4f60"


@attrs.frozen
class Harness:
    upstream: HttpUpstream
    endpoint: Endpoint
    path: Path
    settings: ProxySettings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@asynccontextmanager
async def running(respond: Respond = answer_ok, *, api_key: str | None = None,
                  max_request_bytes: int = 8 * 1024 * 1024,
                  upstream_port: int | None = None) -> AsyncIterator[Harness]:
    directory = Path(tempfile.mkdtemp(prefix="bxip"))
    path = directory / "infer.sock"
    async with trio.open_nursery() as nursery:
        upstream = HttpUpstream(respond)
        port = upstream_port if upstream_port is not None else await nursery.start(
            upstream.serve)
        settings = ProxySettings(upstream=Upstream(scheme="http", host="127.0.0.1", port=port),
                                 api_key=api_key, tls=None,
                                 max_request_bytes=max_request_bytes)
        sock = bind_listener(path)
        await nursery.start(serve, settings, sock)
        try:
            yield Harness(upstream, Endpoint.unix(path), path, settings)
        finally:
            nursery.cancel_scope.cancel()
            sock.close()
            path.unlink(missing_ok=True)
            directory.rmdir()


def parse_response(data: bytes) -> tuple[h11.Response, bytes, bool]:
    """The response in `data`, its body, and whether the body was complete."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    head = conn.next_event()
    assert isinstance(head, h11.Response), head
    body = b""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return head, body, False
        if isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return head, body, True
        else:
            return head, body, False


async def raw_exchange(path: Path, request: bytes) -> bytes:
    """Send `request` as is; everything the proxy sends until it closes."""
    stream = await trio.open_unix_socket(str(path))
    async with stream:
        await stream.send_all(request)
        received = b""
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                break
            if not data:
                break
            received += data
    return received


@asynccontextmanager
async def streaming(endpoint: Endpoint, body: bytes = b"{}") -> AsyncIterator[HttpConnection]:
    """A chat request through the proxy, the head received; the body left to read."""
    conn = await HttpConnection.open(endpoint)
    async with conn:
        await conn.send_request("POST", "/v1/chat/completions", body=body,
                                headers=[("Accept", "text/event-stream")])
        head = await conn.receive_head()
        assert head.status == 200
        assert head.content_type == "text/event-stream"
        yield conn


async def read_until(conn: HttpConnection, end: bytes) -> bytes:
    """Body pieces as they come until they end with `end` (never past it)."""
    received = b""
    while not received.endswith(end):
        data = await conn.receive_body_data()
        assert data is not None, received
        received += data
    return received


def error_of(body: bytes) -> dict[str, object]:
    document = loads_object(body)
    error = document["error"]
    assert isinstance(error, dict)
    assert set(error) == {"code", "message", "type"}
    return error


# -- streaming -------------------------------------------------------------------------


async def test_a_stream_arrives_event_by_event() -> None:
    release_second = trio.Event()

    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        await stream.send_all(sse_head() + chunk(data_event({"n": 1})))
        await release_second.wait()  # set by the test only once the client has event 1
        await stream.send_all(chunk(data_event({"n": 2})) + chunk(b"data: [DONE]\n\n")
                              + LAST_CHUNK)

    with trio.fail_after(20):
        async with running(respond) as h, streaming(h.endpoint, b'{"stream": true}') as conn:
            first = await read_until(conn, b"\n\n")
            assert first == data_event({"n": 1})
            assert not release_second.is_set()
            release_second.set()
            rest = await read_until(conn, b"data: [DONE]\n\n")
            assert rest == data_event({"n": 2}) + b"data: [DONE]\n\n"
            assert await conn.receive_body_data() is None
            assert h.upstream.requests[0].body == b'{"stream": true}'


async def test_several_events_in_one_chunk_and_a_big_body_pass_through_whole() -> None:
    big = b"x" * 300_000

    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        await stream.send_all(sse_head() + chunk(data_event("1") + data_event("2"))
                              + chunk(b"data: " + big + b"\n\n") + chunk(b"data: [DONE]\n\n")
                              + LAST_CHUNK)

    with trio.fail_after(20):
        async with running(respond) as h, streaming(h.endpoint) as conn:
            got = await read_until(conn, b"data: [DONE]\n\n")
            assert await conn.receive_body_data() is None
    assert got == data_event("1") + data_event("2") + b"data: " + big + b"\n\ndata: [DONE]\n\n"


async def test_downstream_going_away_closes_the_upstream_connection() -> None:
    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        await stream.send_all(sse_head() + chunk(data_event({"n": 1})))
        await request.peer_closed.wait()

    with trio.fail_after(20):
        async with running(respond) as h:
            async with streaming(h.endpoint) as conn:
                assert await read_until(conn, b"\n\n") == data_event({"n": 1})
            # the client closed its connection mid-stream
            await h.upstream.requests[0].peer_closed.wait()


async def test_downstream_going_away_before_the_answer_starts_closes_upstream() -> None:
    """A request waiting for a busy slot (no head yet): the client leaving still counts."""
    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.peer_closed.wait()

    with trio.fail_after(20):
        async with running(respond) as h:
            conn = await HttpConnection.open(h.endpoint)
            async with conn:
                await conn.send_request("POST", "/v1/chat/completions", body=b"{}")
                await h.upstream.request_arrived.wait()
            await h.upstream.requests[0].peer_closed.wait()


async def test_upstream_breaking_off_mid_answer_leaves_the_body_incomplete() -> None:
    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        await stream.send_all(sse_head() + chunk(data_event({"n": 1})))
        # and the connection closes without the last chunk

    with trio.fail_after(20):
        async with running(respond) as h, streaming(h.endpoint) as conn:
            assert await read_until(conn, b"\n\n") == data_event({"n": 1})
            with pytest.raises(InferenceClosed):
                await conn.receive_body_data()


async def test_a_chunked_request_body_is_forwarded_piece_by_piece() -> None:
    with trio.fail_after(20):
        async with running() as h:
            stream = await trio.open_unix_socket(str(h.path))
            async with stream:
                await stream.send_all(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n"
                                      b"Transfer-Encoding: chunked\r\n\r\n" + chunk(b'{"con'))
                await h.upstream.request_arrived.wait()
                request = h.upstream.requests[0]
                await request.first_body_data.wait()  # before the rest was even sent
                assert request.body == b'{"con'
                await stream.send_all(chunk(b'tent": "hi"}') + LAST_CHUNK)
                answer = b""
                while data := await stream.receive_some(65536):
                    answer += data
    head, body, complete = parse_response(answer)
    assert (head.status_code, body, complete) == (200, b'{"ok": true}', True)
    assert request.body == b'{"content": "hi"}'
    assert request.header_values(b"transfer-encoding") == [b"chunked"]
    assert request.header_values(b"content-length") == []


# -- what is forwarded -------------------------------------------------------------------

FORWARDED = [
    ("GET", "/health"), ("GET", "/props"), ("GET", "/slots"),
    ("POST", "/v1/chat/completions"), ("POST", "/slots/0?action=save"),
    ("POST", "/slots/1?action=restore"), ("POST", "/slots/12?action=erase"),
    ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/apply-template"),
]


@pytest.mark.parametrize(("method", "target"), FORWARDED)
async def test_the_listed_requests_are_forwarded(method: str, target: str) -> None:
    with trio.fail_after(20):
        async with running() as h:
            body = b'{"filename": "c.bin"}' if method == "POST" else None
            response = await fetch(h.endpoint, method, target, body=body)
    assert response.status == 200
    assert response.body == b'{"ok": true}'
    [request] = h.upstream.requests
    assert (request.method, request.target) == (method.encode(), target.encode())
    assert request.body == (body or b"")


REFUSED = [
    b"GET /v1/models", b"POST /health", b"GET /slots/0?action=save", b"GET /health?x=1",
    b"POST /slots/01?action=save", b"POST /slots/0?action=delete", b"POST /slots/0",
    b"POST /slots/-1?action=save", b"GET /%68ealth", b"GET http://127.0.0.1/health",
    b"GET //health", b"GET /health/", b"POST /v1/chat/completions?x", b"DELETE /slots",
    b"POST /completion", b"GET /metrics", b"OPTIONS *", b"POST /slots/0?action=save&x=1",
]


@pytest.mark.parametrize("request_line", REFUSED)
async def test_anything_else_gets_403_with_a_json_error(request_line: bytes) -> None:
    with trio.fail_after(20):
        async with running() as h:
            answer = await raw_exchange(
                h.path, request_line + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    head, body, complete = parse_response(answer)
    assert head.status_code == 403 and complete
    assert dict(head.headers)[b"content-type"].startswith(b"application/json")
    assert error_of(body)["type"] == "forbidden"
    assert h.upstream.connections == 0


async def test_bad_http_gets_400_and_the_proxy_goes_on_serving() -> None:
    with trio.fail_after(20):
        async with running() as h:
            answer = await raw_exchange(h.path, b"\x16\x03\x01 garbage\r\n\r\n")
            head, body, _ = parse_response(answer)
            assert head.status_code == 400
            assert error_of(body)["type"] == "invalid_request_error"
            response = await fetch(h.endpoint, "GET", "/health")
            assert response.status == 200


async def test_an_unreachable_upstream_is_502(caplog: pytest.LogCaptureFixture) -> None:
    with trio.fail_after(20):
        async with running(upstream_port=free_port()) as h:
            response = await fetch(h.endpoint, "GET", "/health")
    assert response.status == 502
    assert error_of(response.body)["type"] == "unavailable_error"
    assert error_of(response.body)["message"] == "inferproxy cannot reach the inference server"
    # the log line names the server's failure and ends with its pointer, once
    [line] = [r.getMessage() for r in caplog.records if "cannot connect" in r.getMessage()]
    assert line.endswith(" docs/runbook.md#inference-unavailable")
    assert line.count("docs/runbook.md#") == 1


async def test_error_answers_of_the_server_pass_through() -> None:
    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        await stream.send_all(json_answer(
            400, {"error": {"code": 400, "message": "bad", "type": "invalid_request_error"}},
            extra=b"Connection: close\r\n"))

    with trio.fail_after(20):
        async with running(respond) as h:
            response = await fetch(h.endpoint, "POST", "/v1/chat/completions", body=b"{}")
    assert response.status == 400
    assert error_of(response.body)["message"] == "bad"


# -- size --------------------------------------------------------------------------------


async def test_a_declared_oversize_body_is_refused_413_without_reading_it() -> None:
    with trio.fail_after(20):
        async with running(max_request_bytes=1000) as h:
            # only the head is sent: the answer must come without the body
            stream = await trio.open_unix_socket(str(h.path))
            async with stream:
                await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 9000000\r\n\r\n")
                answer = b""
                while data := await stream.receive_some(65536):
                    answer += data
    head, body, complete = parse_response(answer)
    assert head.status_code == 413 and complete
    assert error_of(body)["type"] == "request_too_large"
    assert h.upstream.connections == 0


async def test_a_body_at_the_limit_passes() -> None:
    with trio.fail_after(20):
        async with running(max_request_bytes=1000) as h:
            response = await fetch(h.endpoint, "POST", "/tokenize", body=b"x" * 1000)
    assert response.status == 200
    assert len(h.upstream.requests[0].body) == 1000


async def test_a_chunked_body_growing_past_the_limit_is_413_and_upstream_closed() -> None:
    with trio.fail_after(20):
        async with running(max_request_bytes=1000) as h:
            answer = await raw_exchange(
                h.path, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                b"\r\n\r\n" + chunk(b"a" * 600) + chunk(b"b" * 600) + LAST_CHUNK)
            await h.upstream.requests[0].peer_closed.wait()
    head, body, _ = parse_response(answer)
    assert head.status_code == 413
    assert error_of(body)["type"] == "request_too_large"
    assert not h.upstream.requests[0].complete


# -- headers -----------------------------------------------------------------------------


async def test_the_key_is_added_the_clients_authorization_dropped_and_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(20):
        async with running(api_key=KEY) as h:
            conn = await HttpConnection.open(h.endpoint)
            async with conn:
                await conn.send_request("POST", "/v1/chat/completions", body=b"{}", headers=[
                    ("Authorization", "Bearer client-chosen"), ("Content-Type", "a/b")])
                head = await conn.receive_head()
                await conn.read_body(1000)
            assert head.status == 200
            # and a refused request and a failing one, to exercise the log lines
            await raw_exchange(h.path, b"GET /secret HTTP/1.1\r\nHost: x\r\n"
                               b"Authorization: Bearer " + KEY.encode() + b"\r\n\r\n")
    async with running(api_key=KEY, upstream_port=free_port()) as down:
        assert (await fetch(down.endpoint, "GET", "/health")).status == 502
    [request] = h.upstream.requests
    assert request.header_values(b"authorization") == [f"Bearer {KEY}".encode()]
    assert request.header_values(b"content-type") == [b"a/b"]
    assert caplog.records, "the proxy logs its exchanges"
    assert KEY not in caplog.text
    assert all(KEY not in record.getMessage() for record in caplog.records)
    assert KEY not in repr(h.settings)


async def test_without_a_key_no_authorization_goes_upstream() -> None:
    with trio.fail_after(20):
        async with running() as h:
            conn = await HttpConnection.open(h.endpoint)
            async with conn:
                await conn.send_request("GET", "/props",
                                        headers=[("Authorization", "Bearer client")])
                assert (await conn.receive_head()).status == 200
    assert h.upstream.requests[0].header_values(b"authorization") == []


async def test_hop_by_hop_headers_are_stripped_both_ways() -> None:
    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        body = b'{"ok": true}'
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-End: kept\r\n"
            b"Connection: keep-alive, X-Server-Hop\r\nX-Server-Hop: gone\r\n"
            b"Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nTrailer: X-T\r\n"
            b"Upgrade: h2c\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    with trio.fail_after(20):
        async with running(respond) as h:
            conn = await HttpConnection.open(h.endpoint)
            async with conn:
                await conn.send_request("POST", "/tokenize", body=b"{}", headers=[
                    ("Connection", "keep-alive, X-Client-Hop"), ("X-Client-Hop", "gone"),
                    ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
                    ("Proxy-Authorization", "Basic abc"), ("Proxy-Foo", "x"),
                    ("Trailer", "X-T"), ("Upgrade", "h2c"), ("X-End", "kept"),
                    ("Host", "client.example")])
                head = await conn.receive_head()
                assert await conn.read_body(1000) == b'{"ok": true}'
    seen_up = {name for name, _ in h.upstream.requests[0].headers}
    hop = {b"x-client-hop", b"keep-alive", b"te", b"proxy-authorization", b"proxy-foo",
           b"trailer", b"upgrade"}
    assert not seen_up & hop
    assert h.upstream.requests[0].header_values(b"x-end") == [b"kept"]
    assert h.upstream.requests[0].header_values(b"connection") == [b"close"]
    assert h.upstream.requests[0].header_values(b"host") == [
        h.settings.upstream.host_header.encode()]
    seen_down = {name for name, _ in head.headers}
    assert not seen_down & {b"x-server-hop", b"keep-alive", b"proxy-authenticate", b"trailer",
                            b"upgrade"}
    assert head.header(b"x-end") == b"kept"
    assert head.header(b"connection") == b"close"


async def test_expect_100_continue_is_answered_by_the_proxy() -> None:
    with trio.fail_after(20):
        async with running() as h:
            answer = await raw_exchange(
                h.path, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                b"Content-Length: 2\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 100 ")
    assert b"HTTP/1.1 200 " in answer
    assert h.upstream.requests[0].header_values(b"expect") == []


async def test_a_bad_chunked_body_is_400_and_upstream_closed() -> None:
    with trio.fail_after(20):
        async with running() as h:
            answer = await raw_exchange(
                h.path, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                b"\r\n\r\n" + chunk(b"ok") + b"zz\r\nnot hex\r\n")
            await h.upstream.requests[0].peer_closed.wait()
    head, body, _ = parse_response(answer)
    assert head.status_code == 400
    assert error_of(body)["type"] == "invalid_request_error"
    assert h.upstream.requests[0].body == b"ok"


# -- a client that goes away (issue 22 item 17) ------------------------------------------


def _proxy_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "inferproxy"]


def _assert_one_info_line_for_the_gone_client(caplog: pytest.LogCaptureFixture, *,
                                              answered_head: bool = True) -> None:
    records = _proxy_records(caplog)
    assert [r for r in records if r.levelno >= logging.WARNING] == [], [
        r.getMessage() for r in records]
    assert all(r.exc_info is None for r in records)
    lines = [r.getMessage() for r in records]
    assert len(lines) == 1, lines
    assert ((lines[0].startswith("POST /v1/chat/completions -> 200, ")
            and lines[0].endswith(" s; the client went away"))
            or (lines[0].startswith("POST /v1/chat/completions: the client went away, ")
            and not answered_head)), lines[0]


async def _client_leaves(when: str, how: str, caplog: pytest.LogCaptureFixture) -> None:
    """A streamed answer; the client leaves `how` at `when`; then the server goes on."""
    async def respond(request: Received, stream: trio.abc.Stream) -> None:
        await request.body_done.wait()
        try:
            if when != "before_head":
                await stream.send_all(sse_head() + chunk(data_event({"n": 1})))
                if when == "after_done":
                    await stream.send_all(chunk(b"data: [DONE]\n\n"))
            ready.set()
            await left.wait()
            if when == "before_head":
                await stream.send_all(sse_head())
            await stream.send_all(chunk(data_event({"n": 2})) + LAST_CHUNK)
        except trio.BrokenResourceError:
            pass  # inferproxy closed this connection first: what a leaving client causes
        finally:
            answered.set()

    ready, left, answered = trio.Event(), trio.Event(), trio.Event()
    caplog.set_level(logging.INFO, logger="inferproxy")
    with trio.fail_after(20):
        async with running(respond) as h:
            stream = await trio.open_unix_socket(str(h.path))
            await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: 2\r\n\r\n{}")
            await ready.wait()
            expected = {"before_head": b"", "mid_body": b"\n\n",
                        "after_done": b"data: [DONE]\n\n"}[when]
            received = b""
            while expected not in received:
                received += await stream.receive_some(65536)
            if how == "shut_rd":
                # reading ended, writing not: inferproxy's next send fails (EPIPE)
                # before its watcher could see an end of file
                stream.socket.shutdown(socket.SHUT_RD)
            elif how == "reset":
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
                await stream.aclose()
            else:
                await stream.aclose()
            left.set()
            await answered.wait()
            await trio.testing.wait_all_tasks_blocked()
            if how == "shut_rd":
                await stream.aclose()
            # the proxy's connection task has ended once every task waits
            await trio.testing.wait_all_tasks_blocked()


@pytest.mark.parametrize("how", ["shut_rd", "close", "reset"])
@pytest.mark.parametrize("when", ["after_done", "mid_body", "before_head"])
async def test_a_client_that_goes_away_is_one_info_line(
        when: str, how: str, caplog: pytest.LogCaptureFixture) -> None:
    """shut_rd: the send fails inside the forwarding nursery, no EOF seen (the case
    that logged an ExceptionGroup traceback); close/reset: the ordinary ways."""
    await _client_leaves(when, how, caplog)
    _assert_one_info_line_for_the_gone_client(caplog, answered_head=when != "before_head")


async def test_a_client_leaving_mid_request_body_is_one_info_line(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="inferproxy")
    with trio.fail_after(20):
        async with running() as h:
            stream = await trio.open_unix_socket(str(h.path))
            await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: 100\r\n\r\n{")
            await h.upstream.request_arrived.wait()
            await stream.aclose()
            await h.upstream.requests[0].peer_closed.wait()
            await trio.testing.wait_all_tasks_blocked()
    lines = [r.getMessage() for r in _proxy_records(caplog)]
    assert all(r.levelno == logging.INFO and r.exc_info is None
               for r in _proxy_records(caplog)), lines
    assert len(lines) == 1 and lines[0].startswith(
        "POST /v1/chat/completions: the client went away, "), lines
