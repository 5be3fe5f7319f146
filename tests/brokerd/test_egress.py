"""Egress: address checks (pure) and the per-call SOCKS5 proxy's refusals."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.runner._egress import (
    EgressProxy,
    Seal,
    address_problem,
    embedded_ipv4,
    open_unix_listener,
    vet_addresses,
)

ip = ipaddress.ip_address


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.0.1",
        "169.254.1.1",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "224.0.0.1",
        "ff02::1",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "2002:0a00:0001::1",  # 6to4 around 10.0.0.1
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
        "64:ff9b::a00:1",  # NAT64 around 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
    ],
)
def test_addresses_that_are_not_global_are_refused(address: str) -> None:
    assert address_problem(ip(address), private_network=False) is not None


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "2606:2800:220:1:248:1893:25c8:1946",
        "64:ff9b::5db8:d822",
        "::ffff:93.184.216.34",
    ],
)
def test_global_addresses_pass(address: str) -> None:
    assert address_problem(ip(address), private_network=False) is None


def test_embedded_ipv4_is_found() -> None:
    assert embedded_ipv4(ip("64:ff9b::a00:1")) == [ip("10.0.0.1")]
    assert ip("10.0.0.1") in embedded_ipv4(ip("2002:0a00:0001::1"))
    assert embedded_ipv4(ip("1.2.3.4")) == []


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.0.0.1", "100.64.0.1", "fe80::1", "::ffff:192.168.1.1"]
)
def test_private_network_lifts_only_is_global(address: str) -> None:
    assert address_problem(ip(address), private_network=True) is None


@pytest.mark.parametrize(
    "address", ["224.0.0.1", "ff02::1", "0.0.0.0", "::", "::ffff:224.0.0.1", "64:ff9b::e000:1"]
)
def test_multicast_and_unspecified_stay_refused(address: str) -> None:
    assert address_problem(ip(address), private_network=True) is not None


def test_every_address_must_pass() -> None:
    assert vet_addresses([ip("93.184.216.34"), ip("10.0.0.1")], private_network=False)
    assert vet_addresses([], private_network=True) == "the name has no addresses"
    assert vet_addresses([ip("93.184.216.34")], private_network=False) is None


# -- the proxy --------------------------------------------------------------------

HOST = "sealed.example"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="bx-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


async def echo_server(stream: trio.SocketStream) -> None:
    async with stream:
        while data := await stream.receive_some(1024):
            await stream.send_all(b"echo:" + data)


@pytest.fixture
async def proxy(short_dir: Path) -> AsyncIterator[tuple[EgressProxy, str, int]]:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, echo_server, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        egress = EgressProxy(Seal(host=HOST, port=port, addresses=(ip("127.0.0.1"),)))
        listener = await open_unix_listener(short_dir / "socks")
        await nursery.start(egress.serve, listener)
        yield egress, str(short_dir / "socks"), port
        nursery.cancel_scope.cancel()


async def connect(path: str) -> trio.SocketStream:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(path)
    return trio.SocketStream(sock)


async def recv_exact(stream: trio.SocketStream, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = await stream.receive_some(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def connect_request(host: bytes, port: int, command: int = 1) -> bytes:
    return bytes([5, command, 0, 3, len(host)]) + host + port.to_bytes(2, "big")


async def socks(
    path: str, request: bytes, greeting: bytes = b"\x05\x01\x00"
) -> tuple[bytes, trio.SocketStream]:
    stream = await connect(path)
    await stream.send_all(greeting)
    hello = await recv_exact(stream, 2)
    if hello != b"\x05\x00":
        return hello, stream
    await stream.send_all(request)
    return await recv_exact(stream, 10), stream


async def test_the_sealed_connect_is_relayed_once(proxy: tuple[EgressProxy, str, int]) -> None:
    egress, path, port = proxy
    with trio.fail_after(10):
        reply, stream = await socks(path, connect_request(HOST.encode(), port))
        async with stream:
            assert reply[:2] == b"\x05\x00"
            await stream.send_all(b"ping")
            assert await recv_exact(stream, 9) == b"echo:ping"
        second, stream2 = await socks(path, connect_request(HOST.encode(), port))
        async with stream2:
            assert second[1] == 2  # connection not allowed by ruleset
    assert egress.refusals == ["a second CONNECT"]


@pytest.mark.parametrize(
    "request_bytes",
    [
        connect_request(b"other.example", 1),
        connect_request(HOST.encode(), 1),
        bytes([5, 1, 0, 1, 127, 0, 0, 1, 0, 80]),  # an IPv4 literal
        connect_request(HOST.encode(), 1, command=2),  # BIND
        connect_request(HOST.encode(), 1, command=3),  # UDP ASSOCIATE
    ],
)
async def test_every_other_request_is_refused(
    proxy: tuple[EgressProxy, str, int], request_bytes: bytes
) -> None:
    egress, path, port = proxy
    if request_bytes == connect_request(HOST.encode(), 1):
        request_bytes = connect_request(HOST.encode(), port + 1 if port < 65535 else 1)
    with trio.fail_after(10):
        reply, stream = await socks(path, request_bytes)
        async with stream:
            assert reply[0] == 5 and reply[1] != 0
    assert not egress.used
    # The sealed CONNECT still works afterwards: a refusal does not use it up.
    with trio.fail_after(10):
        reply, stream = await socks(path, connect_request(HOST.encode(), port))
        async with stream:
            assert reply[1] == 0


async def test_a_greeting_without_no_auth_is_refused(proxy: tuple[EgressProxy, str, int]) -> None:
    _egress, path, _port = proxy
    with trio.fail_after(10):
        reply, stream = await socks(path, b"", greeting=b"\x05\x01\x02")
        async with stream:
            assert reply == b"\x05\xff"


async def test_an_unreachable_pinned_address_answers_a_failure(short_dir: Path) -> None:
    # Nothing listens on this port (bound then closed).
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    egress = EgressProxy(Seal(host=HOST, port=port, addresses=(ip("127.0.0.1"),)))
    async with trio.open_nursery() as nursery:
        await nursery.start(egress.serve, await open_unix_listener(short_dir / "socks"))
        with trio.fail_after(10):
            reply, stream = await socks(
                str(short_dir / "socks"), connect_request(HOST.encode(), port)
            )
            async with stream:
                assert reply[1] == 4
        nursery.cancel_scope.cancel()
