"""The upstream side: the shared client with a streamed request body, and verified TLS."""

from __future__ import annotations

import ssl
from functools import partial
from pathlib import Path

import pytest
import trio
import trustme

from boxmaker._http import InferenceUnavailable
from boxmaker.inferproxy._config import Upstream
from boxmaker.inferproxy._upstream import open_upstream, tls_context
from tests.fakes.http_upstream import HttpUpstream
from tests.fakes.sse_client import bare_and_pointed


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(context)
    return context


async def exchange(upstream: Upstream, tls: ssl.SSLContext | None) -> tuple[int, bytes]:
    conn = await open_upstream(upstream, tls=tls, timeout_s=10)
    async with conn:
        await conn.send_head(b"POST", b"/tokenize", [
            (b"Host", upstream.host_header.encode()), (b"Transfer-Encoding", b"chunked")])
        await conn.send_body_data(b'{"a":')
        await conn.send_body_data(b"")
        await conn.send_body_data(b"1}")
        await conn.send_end()
        head = await conn.receive_head()
        return head.status, await conn.read_body(1000)


async def test_a_streamed_request_body_over_plain_http() -> None:
    fake = HttpUpstream()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(fake.serve)
        with trio.fail_after(10):
            status, body = await exchange(Upstream(scheme="http", host="127.0.0.1", port=port),
                                          None)
        nursery.cancel_scope.cancel()
    assert (status, body) == (200, b'{"ok": true}')
    assert fake.requests[0].body == b'{"a":1}'


async def test_tls_verified_against_the_ca_file(tmp_path: Path, ca: trustme.CA) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    fake = HttpUpstream()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(fake.serve,
                                           ssl_context=server_context(ca, "localhost")))
        with trio.fail_after(10):
            status, _ = await exchange(Upstream(scheme="https", host="localhost", port=port),
                                       tls_context(ca_file))
        nursery.cancel_scope.cancel()
    assert status == 200
    assert fake.requests[0].body == b'{"a":1}'


async def test_tls_to_a_server_the_system_store_does_not_trust_fails(ca: trustme.CA) -> None:
    fake = HttpUpstream()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(fake.serve,
                                           ssl_context=server_context(ca, "localhost")))
        with trio.fail_after(10), pytest.raises(InferenceUnavailable, match="TLS") as info:
            await exchange(Upstream(scheme="https", host="localhost", port=port),
                           tls_context(None))
        nursery.cancel_scope.cancel()
    assert bare_and_pointed(info.value)
    assert fake.requests == []


async def test_tls_with_the_wrong_host_name_fails(tmp_path: Path, ca: trustme.CA) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    fake = HttpUpstream()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(fake.serve,
                                           ssl_context=server_context(ca, "other.example")))
        with trio.fail_after(10), pytest.raises(InferenceUnavailable, match="TLS"):
            await exchange(Upstream(scheme="https", host="localhost", port=port),
                           tls_context(ca_file))
        nursery.cancel_scope.cancel()
    assert fake.requests == []


def test_a_ca_file_that_is_not_pem_fails_to_load(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ssl.SSLError):
        tls_context(bad)


async def test_connecting_to_nothing_is_unavailable() -> None:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with trio.fail_after(10), pytest.raises(InferenceUnavailable, match="cannot connect"):
        await open_upstream(Upstream(scheme="http", host="127.0.0.1", port=port), tls=None)
