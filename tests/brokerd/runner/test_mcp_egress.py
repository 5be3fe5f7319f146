"""Egress of an MCP call (12 "Egress"): the rules, brokerd's proxy, the forwarder, podman.

brokerd's proxy is run on a real Unix socket with a recording resolver (the
test's: it sees every name brokerd resolves) and a TCP server of the test on
the host's loopback (it answers ``PONG``): an address literal, a name that is
not allowed (never resolved), a private address, the connection past
`max_connections`, each refused and recorded; the allowed name connected,
its bytes counted (the forwarder in front of it: tests/toolkit/test_forward.py).
On a real podman the fixture server's ``get`` tool
tunnels through the sidecar: the one host the call's URL names works, another
host, an IP literal and a private address are refused and recorded, a
tool without egress reaches nothing, and a server with egress still has only
`lo`, no route and no resolver, and cannot reach the host's loopback.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.brokerd.runner._egress import (
    EgressProxy,
    EgressRules,
    IPAddress,
    ResolveError,
    open_unix_listener,
)
from boxmaker.brokerd.runner._mcp_egress import MAX_RECORDED, egress_records, egress_rules
from boxmaker.brokerd.runner._mcp_runtime import McpRuntime, McpServerState
from boxmaker.brokerd.runner._spec import RunOutcome, build_run_spec
from boxmaker.proto.audit import McpSource
from boxmaker.proto.audit._audit_mcp import _structure_source, result_source_problem
from boxmaker.proto.mcp import (
    ServerDecl,
    tool_verdicts,
)
from tests.brokerd.runner._mcp_fixtures import (
    FAKE,
    fake_command,
    fake_pin,
    server_decl,
    server_toml,
)
from tests.brokerd.runner.test_mcp_mounts import WithFake, _names, _podman_launcher
from tests.fakes.podman import tools_image

INSTANCE = "e9e55c0d"
ALLOWED = "allowed.example"


def egress_decl(image: str = "sha256:" + "ab" * 32, egress: str = "arg:url",
                extra: str = "") -> ServerDecl:
    return server_decl(server_toml(image, fake_command("fetch"), extra=extra,
                                   tools={"get": {"url": "url"}}, egress={"get": egress}))


# -- the rules --------------------------------------------------------------------------------


def test_the_rules_of_each_egress_word() -> None:
    server = egress_decl()
    grammar = tool_verdicts(server, fake_pin(server, ["fetch"]))["get"].grammar
    rules = egress_rules(server, "get", grammar, {"url": "https://docs.example.org/a"}, ())
    assert rules == EgressRules(exact=(("docs.example.org", 443),), limit=32)
    rules = egress_rules(server, "get", grammar, {"url": "http://docs.example.org:8080/"},
                         ("url",))
    assert rules == EgressRules(exact=(("docs.example.org", 8080),), private_network=True,
                                limit=32)
    assert egress_rules(server, "get", grammar, {}, ()) is None
    assert egress_rules(server, "echo", grammar, {"url": "https://x.example.org/"}, ()) is None
    hosts = egress_decl(egress="server", extra='hosts = ["*.example.org", "api.example:8443"]\n'
                                               'private_network = true\nmax_connections = 3')
    rules = egress_rules(hosts, "get", grammar, {"url": "https://elsewhere.example/"}, ())
    assert rules == EgressRules(patterns=("*.example.org", "api.example:8443"),
                                private_network=True, limit=3)
    assert rules.allows("a.example.org", 443) and not rules.allows("example.org", 443)
    assert rules.allows("api.example", 8443) and not rules.allows("api.example", 443)
    assert not rules.allows("a.example.org", 80)


# -- brokerd's proxy on a real socket ---------------------------------------------------------


class Resolver:
    """The test's resolver: every name asked is kept; ALLOWED is the loopback."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        if host == ALLOWED:
            return [ipaddress.ip_address("127.0.0.1")]
        raise ResolveError("no such name")


@asynccontextmanager
async def pong_server() -> AsyncIterator[int]:
    """A TCP server on the host's loopback answering PONG to a line; yields its port."""
    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            with trio.move_on_after(30):
                if await stream.receive_some(4096):
                    await stream.send_all(b"PONG\n")

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, answer, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def socks(path: Path, atyp: int, host: bytes, port: int) -> tuple[int, bytes]:
    """One SOCKS5 CONNECT: the reply code and what PING got back."""
    stream = await trio.open_unix_socket(os.fspath(path))
    async with stream:
        await stream.send_all(b"\x05\x01\x00")
        assert await stream.receive_some(2) == b"\x05\x00"
        address = bytes([len(host)]) + host if atyp == 3 else host
        await stream.send_all(bytes([5, 1, 0, atyp]) + address + port.to_bytes(2, "big"))
        reply = await stream.receive_some(10)
        if reply[1] != 0:
            return reply[1], b""
        await stream.send_all(b"PING\n")
        return 0, await stream.receive_some(100)


async def test_the_proxy_resolves_only_allowed_names_and_records_every_connection(
        tmp_path: Path) -> None:
    resolver = Resolver()
    async with pong_server() as port, trio.open_nursery() as nursery:
        listener = await open_unix_listener(tmp_path / "socks")
        proxy = EgressProxy(rules=EgressRules(exact=((ALLOWED, port),), private_network=True,
                                              limit=5), resolver=resolver)
        await nursery.start(proxy.serve, listener)
        with trio.fail_after(60):
            assert await socks(tmp_path / "socks", 3, ALLOWED.encode(), port) == (0, b"PONG\n")
            assert (await socks(tmp_path / "socks", 3, b"leak.secret.example", port))[0] == 2
            assert (await socks(tmp_path / "socks", 1, bytes([127, 0, 0, 1]), port))[0] == 2
            assert (await socks(tmp_path / "socks", 3, b"127.0.0.1", port))[0] == 2
            assert (await socks(tmp_path / "socks", 3, ALLOWED.encode(), port + 1))[0] == 2
            assert (await socks(tmp_path / "socks", 3, ALLOWED.encode(), port))[0] == 2  # limit
        nursery.cancel_scope.cancel()
    assert resolver.asked == [ALLOWED]
    records = [c.record() for c in proxy.connections]
    assert records == [
        {"host": ALLOWED, "port": port, "address": "127.0.0.1", "bytes_out": 5, "bytes_in": 5,
         "refused": None},
        {"host": "leak.secret.example", "port": port, "address": None, "bytes_out": 0,
         "bytes_in": 0, "refused": "not_allowed"},
        {"host": None, "port": port, "address": None, "bytes_out": 0, "bytes_in": 0,
         "refused": "not_allowed"},
        {"host": None, "port": port, "address": None, "bytes_out": 0, "bytes_in": 0,
         "refused": "not_allowed"},
        {"host": ALLOWED, "port": port + 1, "address": None, "bytes_out": 0, "bytes_in": 0,
         "refused": "not_allowed"},
        {"host": ALLOWED, "port": port, "address": None, "bytes_out": 0, "bytes_in": 0,
         "refused": "limit"},
    ]


async def test_a_private_address_is_refused_without_private_network(tmp_path: Path) -> None:
    resolver = Resolver()
    async with trio.open_nursery() as nursery:
        proxy = EgressProxy(rules=EgressRules(exact=((ALLOWED, 443),)), resolver=resolver)
        await nursery.start(proxy.serve, await open_unix_listener(tmp_path / "socks"))
        with trio.fail_after(60):
            assert (await socks(tmp_path / "socks", 3, ALLOWED.encode(), 443))[0] == 2
        nursery.cancel_scope.cancel()
    assert [c.record() for c in proxy.connections] == [
        {"host": ALLOWED, "port": 443, "address": "127.0.0.1", "bytes_out": 0, "bytes_in": 0,
         "refused": "address_not_allowed"}]


def test_the_records_stop_at_64() -> None:
    proxy = EgressProxy(rules=EgressRules(limit=100))
    from boxmaker.brokerd.runner._egress import Connection
    proxy.connections = [Connection(host=None, port=n, refused="not_allowed")
                         for n in range(MAX_RECORDED + 1)]
    kept, truncated = egress_records(proxy)
    assert len(kept) == MAX_RECORDED and truncated
    assert egress_records(None) == ((), False)


# -- on a real podman -------------------------------------------------------------------------


async def call_get(server: ServerDecl, args: dict[str, Any], resolver: Resolver, *,
                   private: tuple[str, ...] = (), call_id: int = 1,
                   tmp_path: Path) -> RunOutcome:
    counter = iter(range(1 << 20))

    def call_dir(prefix: str) -> Path:
        made = tmp_path / f"{prefix}{next(counter)}"
        made.mkdir(mode=0o700)
        return made

    runtime = McpRuntime(WithFake(_podman_launcher(server.image)),
                         {"fake": McpServerState(decl=server, pin=fake_pin(server, ["fetch"]))},
                         instance=INSTANCE, version="0.test", call_dir=call_dir,
                         resolver=resolver)
    spec = build_run_spec(call_id=call_id, session="default", tool="mcp.fake.get",
                          args={"via": [], **args}, grant="g", grant_entry=None,
                          private_network=False, label="private", untrusted=True,
                          mcp_private_network=private)
    try:
        with trio.fail_after(240):
            return await runtime.run(spec)
    finally:
        assert [n for n in _names() if n.startswith(f"boxmaker-{INSTANCE}-")] == []


def _lines(outcome: RunOutcome) -> list[str]:
    assert outcome.status == "ok", outcome
    assert outcome.output is not None
    found: list[str] = json.loads(outcome.output["content"][0]["text"])
    return found


@pytest.mark.podman
async def test_the_sealed_host_only_through_the_sidecar(tmp_path: Path) -> None:
    server = egress_decl(tools_image())
    resolver = Resolver()
    async with pong_server() as port:
        outcome = await call_get(server, {
            "url": f"https://{ALLOWED}:{port}/",
            "via": [f"{ALLOWED}:{port}", f"other.example:{port}", f"127.0.0.1:{port}",
                    f"[::1]:{port}", f"leak-{os.getpid()}.secret.example:{port}"]},
            resolver, private=("url",), tmp_path=tmp_path)
    assert _lines(outcome) == ["HTTP/1.1 200 Connection established | PONG",
                               "HTTP/1.1 403 Forbidden | ", "HTTP/1.1 403 Forbidden | ",
                               "HTTP/1.1 403 Forbidden | ", "HTTP/1.1 403 Forbidden | "]
    assert resolver.asked == [ALLOWED]
    assert outcome.source is not None
    assert outcome.source["container"].startswith(f"boxmaker-{INSTANCE}-mcp-fake-c")
    assert [(e["host"], e["address"], e["refused"]) for e in outcome.source["egress"]] == [
        (ALLOWED, "127.0.0.1", None), ("other.example", None, "not_allowed"),
        (None, None, "not_allowed"), (None, None, "not_allowed"),
        (f"leak-{os.getpid()}.secret.example", None, "not_allowed")]
    assert outcome.source["egress"][0]["bytes_out"] == 5
    assert outcome.source["egress"][0]["bytes_in"] == 5
    assert outcome.source["egress_truncated"] is False
    # What brokerd records is what the verifier accepts.
    payload = {"status": "ok", "output": None, "source": outcome.source}
    assert result_source_problem(payload) is None
    assert isinstance(_structure_source(outcome.source, None), McpSource)


@pytest.mark.podman
async def test_a_private_address_without_the_grants_private_network(tmp_path: Path) -> None:
    server = egress_decl(tools_image())
    resolver = Resolver()
    async with pong_server() as port:
        outcome = await call_get(server, {"url": f"https://{ALLOWED}:{port}/"}, resolver,
                                 tmp_path=tmp_path)
    assert _lines(outcome) == ["HTTP/1.1 403 Forbidden | "]
    assert outcome.source is not None
    assert [(e["host"], e["address"], e["refused"]) for e in outcome.source["egress"]] == [
        (ALLOWED, "127.0.0.1", "address_not_allowed")]


@pytest.mark.podman
async def test_without_egress_there_is_no_proxy_and_no_network(tmp_path: Path) -> None:
    server = egress_decl(tools_image(), egress="none")
    resolver = Resolver()
    async with pong_server() as port:
        outcome = await call_get(server, {"url": f"https://{ALLOWED}:{port}/",
                                          "via": [f"{ALLOWED}:{port}"]},
                                 resolver, tmp_path=tmp_path)
    assert _lines(outcome) == ["error: ECONNREFUSED"]
    assert resolver.asked == []
    assert outcome.source is not None and outcome.source["egress"] == []


@pytest.mark.podman
async def test_with_egress_the_server_still_has_only_lo_no_route_no_resolver(
        tmp_path: Path) -> None:
    """The server shares the sidecar's namespace: `lo` only, no route, no resolver, and a
    listener on the host's loopback is not reached (127.0.0.1 is the sidecar's)."""
    server = server_decl(server_toml(tools_image(), fake_command("network"),
                                     extra=f'hosts = ["{ALLOWED}"]\n'))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    pin = fake_pin(server)
    runtime = McpRuntime(WithFake(_podman_launcher(server.image)),
                         {"fake": McpServerState(decl=server, pin=pin)},
                         instance=INSTANCE, version="0.test",
                         call_dir=lambda prefix: Path(tempfile.mkdtemp(prefix=prefix,
                                                                       dir=tmp_path)),
                         resolver=Resolver())
    spec = build_run_spec(call_id=4, session="default", tool="mcp.fake.echo",
                          args={"text": f"127.0.0.1:{port}"}, grant="g", grant_entry=None,
                          private_network=False, label="private", untrusted=True)
    try:
        with trio.fail_after(240):
            outcome = await runtime.run(spec)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
        assert [n for n in _names() if n.startswith(f"boxmaker-{INSTANCE}-")] == []
    assert outcome.status == "ok", outcome
    assert outcome.output is not None
    view = json.loads(outcome.output["content"][0]["text"])
    assert view["interfaces"] == ["lo"]
    assert view["routes"] == []
    assert view["resolve"].startswith("error")
    assert view["connect"].startswith("error")
    assert outcome.source is not None and outcome.source["egress"] == []


async def test_no_sidecar_no_call_and_nothing_is_left(tmp_path: Path) -> None:
    """A launcher without a sidecar (the test launcher) is `source_unavailable` before
    the server starts; without a scratch directory it is `runner_unavailable`; the
    per-call directory goes either way."""
    from boxmaker.brokerd.runner._mcp_launch import SubprocessMcpLauncher

    server = egress_decl()
    launcher = SubprocessMcpLauncher(lambda _d: [sys.executable, "-I", str(FAKE), "{}"])
    made: list[Path] = []

    def call_dir(prefix: str) -> Path:
        made.append(Path(tempfile.mkdtemp(prefix=prefix, dir=tmp_path)))
        return made[-1]

    spec = build_run_spec(call_id=7, session="default", tool="mcp.fake.get",
                          args={"url": "https://docs.example.org/", "via": []}, grant="g",
                          grant_entry=None, private_network=False, label="private",
                          untrusted=True)
    for directory in (call_dir, None):
        state = McpServerState(decl=server, pin=fake_pin(server, ["fetch"]))
        runtime = McpRuntime(launcher, {"fake": state},
                             instance=INSTANCE, version="0.test", call_dir=directory)
        with trio.fail_after(60):
            outcome = await runtime.run(spec)
        expected = "source_unavailable" if directory is not None else "runner_unavailable"
        assert outcome.status == expected, outcome
        assert outcome.source is not None and outcome.source["request_sha256"] is None
    assert launcher.launched == []
    assert made and not any(p.exists() for p in made)
