"""The witness protocol's HTTP/1.1 server and client (boxmaker/_http/_http11.py).

Server behaviour over trio memory streams (with the autojump clock for the
deadlines), the client against the server over real TCP on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from pathlib import Path

import pytest
import trio
import trio.testing
import trustme

from boxmaker._http import _http11
from boxmaker._http._http11 import (
    MAX_BODY,
    HttpError,
    HttpRequest,
    HttpResponse,
    request,
    serve_connection,
    serve_tcp,
)
from boxmaker.proto._grammar import GrammarError, parse_endpoint_url


class Recorder:
    def __init__(self) -> None:
        self.seen: list[HttpRequest] = []

    async def __call__(self, req: HttpRequest) -> HttpResponse:
        self.seen.append(req)
        return HttpResponse(status=200, body=b"got " + req.body, content_type="text/x-test")


async def _exchange(raw: bytes, handler: _http11.Handler, *, close: bool = True) -> bytes:
    """Send raw bytes to serve_connection; return all it answered until it returned."""
    client, server = trio.testing.memory_stream_pair()
    answered = bytearray()
    async with trio.open_nursery() as nursery:
        async def run_server() -> None:
            await serve_connection(server, handler)
            await server.aclose()

        nursery.start_soon(run_server)
        await client.send_all(raw)
        if close:
            await client.send_eof()
        while True:
            data = await client.receive_some(65536)
            if not data:
                break
            answered += data
    return bytes(answered)


def _responses(raw: bytes) -> list[tuple[int, bytes, dict[bytes, bytes]]]:
    """Split the server's bytes into (status, body, headers), by content-length."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep, raw
        status_line, *header_lines = head.split(b"\r\n")
        version, status, _reason = status_line.split(b" ", 2)
        assert version == b"HTTP/1.1"
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers[b"content-length"])
        out.append((int(status), rest[:length], headers))
        raw = rest[length:]
    return out


async def test_two_requests_on_one_kept_alive_connection(autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    raw = (b"POST /add-checkpoint HTTP/1.1\r\nhost: w\r\ncontent-length: 3\r\n\r\nabc"
           b"GET /x HTTP/1.1\r\nhost: w\r\nX-Thing: v\r\n\r\n")
    answers = _responses(await _exchange(raw, handler))
    assert [(s, b) for s, b, _ in answers] == [(200, b"got abc"), (200, b"got ")]
    assert answers[0][2][b"content-type"] == b"text/x-test"
    assert answers[0][2][b"content-length"] == b"7"
    assert [(r.method, r.target, r.body) for r in handler.seen] == [
        ("POST", "/add-checkpoint", b"abc"), ("GET", "/x", b"")]
    assert ("x-thing", "v") in handler.seen[1].headers


async def test_a_body_over_the_bound_gets_413_and_the_handler_never_runs(
        autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    head = f"POST / HTTP/1.1\r\nhost: w\r\ncontent-length: {MAX_BODY + 1}\r\n\r\n".encode()
    answers = _responses(await _exchange(head + b"x" * (MAX_BODY + 1), handler))
    assert [(s, b) for s, b, _ in answers] == [(413, b"too big\n")]
    assert answers[0][2][b"connection"] == b"close"
    assert handler.seen == []


async def test_a_body_at_the_bound_is_served(autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    head = f"POST / HTTP/1.1\r\nhost: w\r\ncontent-length: {MAX_BODY}\r\n\r\n".encode()
    answers = _responses(await _exchange(head + b"y" * MAX_BODY, handler))
    assert answers[0][0] == 200 and len(handler.seen[0].body) == MAX_BODY


async def test_garbage_gets_400_and_the_connection_ends(autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    answers = _responses(await _exchange(b"NOT HTTP AT ALL\r\n\r\n", handler))
    assert [(s, b) for s, b, _ in answers] == [(400, b"bad request\n")]
    assert handler.seen == []


async def test_an_idle_connection_is_closed_after_its_deadline(
        autojump_clock: trio.abc.Clock) -> None:
    client, server = trio.testing.memory_stream_pair()
    start = trio.current_time()
    with trio.fail_after(_http11.IDLE_TIMEOUT_S + 5):
        await serve_connection(server, Recorder())
    assert trio.current_time() - start >= _http11.IDLE_TIMEOUT_S
    await client.aclose()


async def test_a_slow_body_is_dropped_after_the_request_deadline(
        autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(b"POST / HTTP/1.1\r\nhost: w\r\ncontent-length: 10\r\n\r\nabc")
    start = trio.current_time()
    with trio.fail_after(_http11.REQUEST_TIMEOUT_S + 5):
        await serve_connection(server, handler)
    assert trio.current_time() - start >= _http11.REQUEST_TIMEOUT_S
    assert handler.seen == []


async def test_a_peer_that_resets_does_not_raise(autojump_clock: trio.abc.Clock) -> None:
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(b"GET / HTTP/1.1\r\nhost: w\r\n\r\n")
    await client.aclose()  # the answer cannot be delivered
    with trio.fail_after(5):
        await serve_connection(server, Recorder())


async def test_client_and_server_over_tcp() -> None:
    handler = Recorder()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve_tcp, handler, "127.0.0.1", 0)
            port = listeners[0].socket.getsockname()[1]
            url = parse_endpoint_url(f"http://127.0.0.1:{port}/witness/")
            answer = await request(url, "POST", "/add-checkpoint", b"note",
                                   content_type="text/plain")
            assert answer == HttpResponse(status=200, body=b"got note",
                                          content_type="text/x-test")
            assert handler.seen[0].target == "/witness/add-checkpoint"
            assert ("host", f"127.0.0.1:{port}") in handler.seen[0].headers
            nursery.cancel_scope.cancel()


async def test_after_close_is_called_once_per_closed_connection() -> None:
    closed: list[int] = []
    three = trio.Event()

    def after_close() -> None:
        closed.append(len(closed))
        if len(closed) == 3:
            three.set()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(functools.partial(
                serve_tcp, Recorder(), "127.0.0.1", 0, after_close=after_close))
            url = parse_endpoint_url(f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/")
            for number in range(3):
                answer = await request(url, "POST", "x", b"%d" % number,
                                       content_type="text/plain")
                assert answer.status == 200
            await three.wait()
            assert closed == [0, 1, 2]
            nursery.cancel_scope.cancel()


async def test_a_handler_that_fails_is_contained_to_its_connection() -> None:
    calls = 0

    async def flaky(req: HttpRequest) -> HttpResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug in the handler")
        return HttpResponse(status=204)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve_tcp, flaky, "127.0.0.1", 0)
            url = parse_endpoint_url(f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}")
            with pytest.raises(HttpError):
                await request(url, "GET", "/")
            assert (await request(url, "GET", "/")).status == 204
            nursery.cancel_scope.cancel()


async def test_client_refuses_a_too_big_answer() -> None:
    async def big(req: HttpRequest) -> HttpResponse:
        return HttpResponse(status=200, body=b"z" * (MAX_BODY + 1))

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve_tcp, big, "127.0.0.1", 0)
            url = parse_endpoint_url(f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}")
            with pytest.raises(HttpError, match="too big"):
                await request(url, "GET", "/")
            nursery.cancel_scope.cancel()


async def test_client_connection_refused_is_an_http_error() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nobody listens there now
    with trio.fail_after(10), pytest.raises(HttpError, match="cannot connect"):
        await request(parse_endpoint_url(f"http://127.0.0.1:{port}"), "GET", "/")


async def test_client_refuses_an_answer_that_is_not_http() -> None:
    async def junk(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"SSH-2.0-OpenSSH\r\n\r\n")
        await stream.aclose()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            serve = functools.partial(trio.serve_tcp, junk, 0, host="127.0.0.1")
            listeners = await nursery.start(serve)
            url = parse_endpoint_url(f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}")
            with pytest.raises(HttpError):
                await request(url, "GET", "/")
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("text", "parsed"), [
    ("http://w.example", ("http", "w.example", 80, "")),
    ("https://w.example/", ("https", "w.example", 443, "")),
    ("https://w.example:8443/a/b/", ("https", "w.example", 8443, "/a/b")),
    ("http://[::1]:81/x", ("http", "::1", 81, "/x")),
])
def test_url_parse(text: str, parsed: tuple[str, str, int, str]) -> None:
    url = parse_endpoint_url(text)
    assert (url.scheme, url.host, url.effective_port, url.path_prefix) == parsed


@pytest.mark.parametrize("text", [
    "ftp://w.example", "w.example", "http://", "https://w.example/?q=1",
    "https://w.example/#f", "https://user:pw@w.example/",
])
def test_url_parse_refuses(text: str) -> None:
    with pytest.raises(GrammarError):
        parse_endpoint_url(text)


# -- issue 22 item 1: HTTP/1.1 only, and what the approval page needs -------------------------


async def test_an_http2_preface_gets_505_and_the_connection_ends(
        autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    answers = _responses(await _exchange(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", handler))
    assert [s for s, _, _ in answers] == [505]
    assert handler.seen == []


async def test_an_h2c_upgrade_is_answered_as_http11(autojump_clock: trio.abc.Clock) -> None:
    handler = Recorder()
    raw = (b"GET / HTTP/1.1\r\nhost: w\r\nconnection: Upgrade, HTTP2-Settings\r\n"
           b"upgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
    answered = await _exchange(raw, handler)
    assert answered.startswith(b"HTTP/1.1 200 ") and b"101" not in answered.split(b"\r\n")[0]


async def test_head_gets_the_length_and_no_body(autojump_clock: trio.abc.Clock) -> None:
    answered = await _exchange(b"HEAD / HTTP/1.1\r\nhost: w\r\n\r\n", Recorder())
    head, _, rest = answered.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"content-length: 4" in head
    assert rest == b""


async def test_further_headers_and_the_servers_own_answers(
        autojump_clock: trio.abc.Clock) -> None:
    async def with_headers(req: HttpRequest) -> HttpResponse:
        return HttpResponse(status=200, headers=(("x-frame-options", "DENY"),))

    answers = _responses(await _exchange(b"GET / HTTP/1.1\r\nhost: w\r\n\r\n", with_headers))
    assert answers[0][2][b"x-frame-options"] == b"DENY"

    def own(status: int, reason: str) -> HttpResponse:
        return HttpResponse(status=status, body=b"{}", content_type="application/json",
                            headers=(("x-own", reason),))

    client, server = trio.testing.memory_stream_pair()
    head = f"POST / HTTP/1.1\r\nhost: w\r\ncontent-length: {MAX_BODY + 1}\r\n\r\n".encode()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(serve_connection, server, with_headers,
                                             own_answer=own))
        await client.send_all(head + b"x" * (MAX_BODY + 1))
        answered = b""
        while b"\r\n\r\n{}" not in answered:
            answered += await client.receive_some(65536)
    assert answered.startswith(b"HTTP/1.1 413 ") and b"x-own: too big" in answered


async def test_tls_offers_http11_alone_and_a_plain_client_is_contained(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "both.pem"))
    context = _http11.server_tls(str(tmp_path / "both.pem"), str(tmp_path / "both.pem"))
    handler = Recorder()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(functools.partial(
                serve_tcp, handler, "127.0.0.1", 0, ssl_context=context))
            port = listeners[0].socket.getsockname()[1]
            plain = await trio.open_tcp_stream("127.0.0.1", port)
            await plain.send_all(b"GET / HTTP/1.1\r\nhost: w\r\n\r\n")  # not TLS
            with contextlib.suppress(trio.BrokenResourceError):
                while await plain.receive_some(65536):
                    pass
            await plain.aclose()
            for offered in (["h2", "http/1.1"], ["h2"]):
                client = ssl.create_default_context()
                ca.configure_trust(client)
                client.set_alpn_protocols(offered)
                stream = trio.SSLStream(await trio.open_tcp_stream("127.0.0.1", port), client,
                                        server_hostname="localhost")
                await stream.do_handshake()
                assert stream.selected_alpn_protocol() in (None, "http/1.1")
                await stream.send_all(b"GET /x HTTP/1.1\r\nhost: w\r\nconnection: close\r\n\r\n")
                answered = b""
                with contextlib.suppress(trio.BrokenResourceError):
                    while data := await stream.receive_some(65536):
                        answered += data
                assert answered.startswith(b"HTTP/1.1 200 ")
                await trio.aclose_forcefully(stream)
            assert [r.target for r in handler.seen] == ["/x", "/x"]
            nursery.cancel_scope.cancel()


async def test_connections_over_the_bound_wait_for_a_free_one() -> None:
    handler = Recorder()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(functools.partial(
                serve_tcp, handler, "127.0.0.1", 0, max_connections=1))
            port = listeners[0].socket.getsockname()[1]
            holder = await trio.open_tcp_stream("127.0.0.1", port)
            await holder.send_all(b"GET /1 HTTP/1.1\r\nhost: w\r\n\r\n")
            assert (await holder.receive_some(65536)).startswith(b"HTTP/1.1 200 ")
            url = parse_endpoint_url(f"http://127.0.0.1:{port}")
            second: list[HttpResponse] = []

            async def ask() -> None:
                second.append(await request(url, "GET", "/2"))

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked(0.2)
            assert second == [] and len(handler.seen) == 1  # waits: the one slot is held
            await holder.aclose()
            while not second:
                await trio.sleep(0.01)  # real TCP: the second is served once the slot frees
            assert second[0].status == 200
            nursery.cancel_scope.cancel()
