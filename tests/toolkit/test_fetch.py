"""http_fetch against a local HTTPS server, through brokerd's per-call SOCKS5 proxy.

The name boxmaker-test.internal is sealed in the proxy and pinned to 127.0.0.1,
so no resolver or /etc/hosts entry is involved.  The toolkit trusts the test
CA through SSL_CERT_FILE (the image's CA bundle plays that part in a container).
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme

from boxmaker.brokerd.runner._egress import EgressProxy, Seal, open_unix_listener
from boxmaker.toolkit.__main__ import run

HOST = "boxmaker-test.internal"
Responder = Callable[[bytes], bytes]


def response(status: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    head += f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode() + body


def default_responder(request: bytes) -> bytes:
    target = request.split(b" ", 2)[1]
    if target == b"/ok?q=1":
        return response(
            "200 OK",
            [
                ("Content-Type", "text/plain"),
                ("Set-Cookie", "s=1"),
                ("X-Secret", "no"),
                ("ETag", '"abc"'),
            ],
            b"hello",
        )
    if target == b"/redirect":
        return response("302 Found", [("Location", "https://elsewhere.example/next")])
    if target == b"/big":
        return response("200 OK", [("Content-Type", "application/octet-stream")], b"\xff" * 100_000)
    return response("404 Not Found", [])


class Server:
    def __init__(self, responder: Responder, ssl_context: ssl.SSLContext | None) -> None:
        self.responder = responder
        self.ssl_context = ssl_context
        self.requests: list[bytes] = []
        self.port = 0

    async def handle(self, stream: trio.abc.Stream) -> None:
        if self.ssl_context is not None:
            stream = trio.SSLStream(stream, self.ssl_context, server_side=True)
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            self.requests.append(data)
            await stream.send_all(self.responder(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await trio.aclose_forcefully(stream)


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 108 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="bx-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def trust(ca: trustme.CA, short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = short_dir / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))


def server_context(ca: trustme.CA, name: str = HOST) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(context)
    return context


async def start_server(nursery: trio.Nursery, server: Server) -> None:
    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    server.port = listeners[0].socket.getsockname()[1]


async def start_proxy(nursery: trio.Nursery, where: Path, port: int) -> tuple[EgressProxy, str]:
    sock = where / "socks"
    listener = await open_unix_listener(sock)
    proxy = EgressProxy(Seal(host=HOST, port=port, addresses=(ipaddress.ip_address("127.0.0.1"),)))
    await nursery.start(proxy.serve, listener)
    return proxy, str(sock)


async def fetch(url: str, sock: str, cap: int = 1 << 20, method: str = "GET") -> dict[str, Any]:
    request = {
        "args": {"url": url, "method": method},
        "limits": {"output_max_bytes": cap},
        "egress": {"socket": sock},
    }
    with trio.fail_after(20):
        raw = await trio.to_thread.run_sync(run, "http_fetch", json.dumps(request).encode())
    assert len(raw) <= cap
    answer = json.loads(raw)
    assert isinstance(answer, dict)
    return answer


@pytest.fixture
async def https(ca: trustme.CA, trust: None, short_dir: Path) -> AsyncIterator[tuple[Server, str]]:
    async with trio.open_nursery() as nursery:
        server = Server(default_responder, server_context(ca))
        await start_server(nursery, server)
        _proxy, sock = await start_proxy(nursery, short_dir, server.port)
        yield server, sock
        nursery.cancel_scope.cancel()


async def test_a_fetch_over_tls_returns_status_kept_headers_and_body(
    https: tuple[Server, str],
) -> None:
    server, sock = https
    answer = await fetch(f"https://{HOST}:{server.port}/ok?q=1", sock)
    assert answer == {
        "ok": {
            "status": 200,
            "headers": {"content-type": "text/plain", "etag": '"abc"', "content-length": "5"},
            "body": "hello",
            "encoding": "utf-8",
            "bytes": 5,
            "truncated": False,
        }
    }
    request = server.requests[0]
    assert request.startswith(b"GET /ok?q=1 HTTP/1.1\r\n")
    assert f"host: {HOST}:{server.port}\r\n".encode() in request


async def test_a_redirect_is_returned_not_followed(https: tuple[Server, str]) -> None:
    server, sock = https
    answer = await fetch(f"https://{HOST}:{server.port}/redirect", sock)
    assert answer["ok"]["status"] == 302
    assert answer["ok"]["headers"]["location"] == "https://elsewhere.example/next"
    assert len(server.requests) == 1


async def test_a_big_binary_body_is_truncated_to_fit(https: tuple[Server, str]) -> None:
    server, sock = https
    answer = await fetch(f"https://{HOST}:{server.port}/big", sock, cap=10_000)
    out = answer["ok"]
    assert out["encoding"] == "base64"
    assert out["truncated"] is True
    assert out["bytes"] == 100_000


async def test_head_has_no_body(https: tuple[Server, str]) -> None:
    server, sock = https
    answer = await fetch(f"https://{HOST}:{server.port}/ok?q=1", sock, method="HEAD")
    assert answer["ok"]["status"] == 200
    assert answer["ok"]["body"] == ""
    assert server.requests[0].startswith(b"HEAD ")


async def test_a_certificate_for_another_name_is_refused(
    ca: trustme.CA, trust: None, short_dir: Path
) -> None:
    async with trio.open_nursery() as nursery:
        server = Server(default_responder, server_context(ca, "someone-else.example"))
        await start_server(nursery, server)
        _proxy, sock = await start_proxy(nursery, short_dir, server.port)
        answer = await fetch(f"https://{HOST}:{server.port}/ok?q=1", sock)
        assert answer["error"]["code"] == "tls_failed"
        nursery.cancel_scope.cancel()


async def test_an_untrusted_certificate_is_refused(ca: trustme.CA, short_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        server = Server(default_responder, server_context(ca))
        await start_server(nursery, server)
        _proxy, sock = await start_proxy(nursery, short_dir, server.port)
        answer = await fetch(f"https://{HOST}:{server.port}/ok?q=1", sock)
        assert answer["error"]["code"] == "tls_failed"
        nursery.cancel_scope.cancel()


async def test_plain_http_when_the_url_says_so(short_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        server = Server(default_responder, None)
        await start_server(nursery, server)
        _proxy, sock = await start_proxy(nursery, short_dir, server.port)
        answer = await fetch(f"http://{HOST}:{server.port}/ok?q=1", sock)
        assert answer["ok"]["body"] == "hello"
        nursery.cancel_scope.cancel()


async def test_another_host_or_port_is_refused_by_the_proxy(https: tuple[Server, str]) -> None:
    server, sock = https
    other_host = await fetch(f"https://other.example:{server.port}/ok", sock)
    assert other_host["error"]["code"] == "egress_refused"
    other_port = await fetch(f"https://{HOST}:{server.port + 1}/ok", sock)
    assert other_port["error"]["code"] == "egress_refused"
    assert server.requests == []


async def test_without_an_egress_socket_there_is_no_way_out() -> None:
    answer = await fetch("https://boxmaker-test.internal/", "/nonexistent/socks")
    assert answer["error"]["code"] == "egress_unavailable"
