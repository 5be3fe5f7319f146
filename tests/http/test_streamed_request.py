"""HttpConnection's public seams: over any connected stream, and the request streamed.

inferproxy sends the client's body piece by piece with `send_head`,
`send_body_data` and `send_end` over a TCP or TLS stream it opened itself.
Here the stream is an in-memory pair and the server an h11 server on the
other end, reading the bytes exactly as they were sent.
"""

from __future__ import annotations

import h11
import pytest
import trio
import trio.testing

from boxmaker._http import Endpoint, InferenceClosed
from boxmaker._http.client import HttpConnection
from tests.fakes.sse_client import bare_and_pointed

ENDPOINT = Endpoint.tcp("upstream.test", 8080)


class Server:
    """The server end of a memory stream pair: every byte received, and h11's reading."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER)
        self.raw = b""

    async def read_request(self) -> tuple[h11.Request, list[bytes]]:
        request: h11.Request | None = None
        body: list[bytes] = []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.stream.receive_some(65536)
                self.raw += data
                self.h11.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, body

    async def answer(self, raw: bytes) -> None:
        await self.stream.send_all(raw)


def pair() -> tuple[HttpConnection, Server]:
    client_end, server_end = trio.testing.memory_stream_pair()
    return HttpConnection(client_end, ENDPOINT), Server(server_end)


async def test_a_chunked_body_goes_out_piece_by_piece_as_given() -> None:
    conn, server = pair()
    with trio.fail_after(10):
        async with conn:
            await conn.send_head(b"POST", b"/tokenize", [(b"Host", b"upstream.test:8080"),
                                                         (b"Transfer-Encoding", b"chunked")])
            await conn.send_body_data(b'{"a":')
            await conn.send_body_data(b"")  # nothing goes out for an empty piece
            await conn.send_body_data(b"1}")
            await conn.send_end()
            request, body = await server.read_request()
            await server.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            head = await conn.receive_head()
            answer = await conn.read_body(100)
    assert (request.method, request.target) == (b"POST", b"/tokenize")
    assert body == [b'{"a":', b"1}"]
    assert server.raw.endswith(b'\r\n\r\n5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n')
    assert (head.status, answer) == (200, b"ok")


async def test_send_head_sends_the_headers_exactly_as_given() -> None:
    conn, server = pair()
    with trio.fail_after(10):
        async with conn:
            await conn.send_head(b"POST", b"/x", [(b"Host", b"h"), (b"Content-Length", b"3"),
                                                  (b"X-Kept", b"1")])
            await conn.send_body_data(b"abc")
            await conn.send_end()
            request, body = await server.read_request()
    # no User-Agent or Host of its own: the caller's headers are the whole head
    assert request.headers == [(b"host", b"h"), (b"content-length", b"3"), (b"x-kept", b"1")]
    assert body == [b"abc"]
    assert server.raw == b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-Kept: 1\r\n\r\nabc"


async def test_a_streamed_head_request_expects_no_body_even_when_chunked_is_announced() -> None:
    conn, server = pair()
    with trio.fail_after(10):
        async with conn:
            await conn.send_head(b"HEAD", b"/health", [(b"Host", b"h")])
            await conn.send_end()
            await server.read_request()
            await server.answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            head = await conn.receive_head()
            assert head.status == 200
            assert await conn.receive_body_data() is None


async def test_a_head_h11_refuses_is_a_value_error_and_nothing_is_sent() -> None:
    conn, server = pair()
    with trio.fail_after(10):
        async with conn:
            with pytest.raises(ValueError, match="cannot send this request"):
                await conn.send_head(b"POST", b"/x", [(b"Host", b"h"), (b"Bad Name", b"1")])
    assert server.raw == b""


async def test_a_peer_gone_while_the_body_is_sent_names_the_given_endpoint() -> None:
    client_end, server_end = trio.testing.memory_stream_pair()
    conn = HttpConnection(client_end, ENDPOINT)
    with trio.fail_after(10):
        async with conn:
            await conn.send_head(b"POST", b"/x", [(b"Host", b"h"),
                                                  (b"Transfer-Encoding", b"chunked")])
            await server_end.aclose()
            with pytest.raises(InferenceClosed) as info:
                await conn.send_body_data(b"more")
    assert "http://upstream.test:8080" in info.value.message
    assert bare_and_pointed(info.value)
