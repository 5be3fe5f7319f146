"""The egress sidecar's forwarder (`python3 -m boxmaker.toolkit egress-forward`), as a process.

It runs on the host in front of brokerd's real proxy (a Unix socket, the test's
resolver) and a TCP server of the test: a CONNECT to the allowed name tunnels,
a CONNECT to another name and an absolute-form request are 403, and only the
allowed name was resolved.  `connect_target` takes only ``CONNECT name:port``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.runner._egress import EgressProxy, EgressRules, open_unix_listener
from boxmaker.toolkit._forward import connect_target
from tests.brokerd.runner.test_mcp_egress import ALLOWED, Resolver, pong_server


@pytest.mark.parametrize(("head", "target"), [
    (b"CONNECT a.example:443 HTTP/1.1", (b"a.example", 443)),
    (b"CONNECT [::1]:8080 HTTP/1.1\r\nHost: x", (b"::1", 8080)),
    (b"GET http://a.example/ HTTP/1.1", None),
    (b"CONNECT a.example HTTP/1.1", None),
    (b"CONNECT a.example:0 HTTP/1.1", None),
    (b"CONNECT a.example:99999 HTTP/1.1", None),
    (b"CONNECT a.example:443 SPDY/3", None),
    (b"CONNECT :443 HTTP/1.1", None),
])
def test_only_a_connect_names_a_target(head: bytes, target: tuple[bytes, int] | None) -> None:
    assert connect_target(head) == target


async def test_the_forwarder_tunnels_connect_and_refuses_the_rest(tmp_path: Path) -> None:
    resolver = Resolver()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    listen_port = probe.getsockname()[1]
    probe.close()
    async with pong_server() as port, trio.open_nursery() as nursery:
        proxy = EgressProxy(rules=EgressRules(exact=((ALLOWED, port),), private_network=True),
                            resolver=resolver)
        await nursery.start(proxy.serve, await open_unix_listener(tmp_path / "socks"))
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "boxmaker.toolkit", "egress-forward", "--listen",
             f"127.0.0.1:{listen_port}", "--socket", str(tmp_path / "socks")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert process.stdout is not None and process.stdin is not None
            with trio.fail_after(60):
                assert await process.stdout.receive_some(100) == b"ready\n"
                got = []
                for head in (f"CONNECT {ALLOWED}:{port} HTTP/1.1\r\n\r\n",
                             f"CONNECT other.example:{port} HTTP/1.1\r\n\r\n",
                             f"GET http://{ALLOWED}:{port}/ HTTP/1.1\r\n\r\n"):
                    stream = await trio.open_tcp_stream("127.0.0.1", listen_port)
                    async with stream:
                        await stream.send_all(head.encode())
                        answer = await stream.receive_some(4096)
                        tunnel = b""
                        if answer.startswith(b"HTTP/1.1 200"):
                            await stream.send_all(b"PING\n")
                            tunnel = await stream.receive_some(100)
                        got.append((answer.split(b"\r\n")[0], tunnel))
            assert got == [(b"HTTP/1.1 200 Connection established", b"PONG\n"),
                           (b"HTTP/1.1 403 Forbidden", b""), (b"HTTP/1.1 403 Forbidden", b"")]
        finally:
            await process.stdin.aclose()
            with trio.fail_after(30):
                await process.wait()
        nursery.cancel_scope.cancel()
    assert resolver.asked == [ALLOWED]
