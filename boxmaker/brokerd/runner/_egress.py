"""Egress (08-runner, 12 "Egress"): address checks and the per-call SOCKS5 proxy.

http_fetch: brokerd resolves the host once, when the call is about to run, and
refuses the call unless every address (and every IPv4 address embedded in it)
may be reached; the vetted addresses are pinned.  For the call's life a SOCKS5
server on a Unix socket in a per-call directory (mounted into the container)
accepts exactly one CONNECT, to the sealed host and port, connects it to a
pinned address, and refuses everything else (`Seal`).

An MCP server with egress (`EgressRules`, generalised): up to `limit`
CONNECTs over the container's life, each **by name**; a name is matched
against the allowed set first and only a name that matches is resolved (no
DNS exfiltration), once per connection; every address must pass the address
table (`private_network` lifts its rows); the connection goes to those
addresses in order.  Every CONNECT, let through or refused, is a `Connection`
(``result.source.egress``), its bytes counted both ways.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from ..._errors import UnavailableError
from ...proto._escape import escape_line
from ...proto._grammar import host_problem
from ._addresses import IPAddress, address_problem, embedded_ipv4, vet_addresses
from ._mounts import UnsafeTarget

log = logging.getLogger("boxmaker.brokerd.runner.egress")

__all__ = [  # the address checks live in _addresses; re-exported for the runner
    "Connection", "EgressProxy", "EgressRules", "IPAddress", "ResolveError", "Resolver",
    "Seal", "address_problem",
    "embedded_ipv4", "open_unix_listener", "split_url", "system_resolver", "vet_addresses",
]

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

_SOCKS_TIMEOUT_S = 10.0
_CONNECT_TIMEOUT_S = 10.0
_RESOLVE_TIMEOUT_S = 10.0


class ResolveError(UnavailableError):
    """The host did not resolve (the environment's or the name's fault)."""


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The host's addresses from the system resolver, in its order, deduplicated."""
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ResolveError(f"the name did not resolve ({exc.strerror or exc})") from exc
    seen: list[IPAddress] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in seen:
            seen.append(address)
    return seen


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL already of 03-policy's grammar."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("https", "http"):
        raise UnsafeTarget("the URL is not http:// or https://")
    authority = re.split(r"[/?]", rest, maxsplit=1)[0]
    host, sep, port_text = authority.partition(":")
    port = 443 if scheme == "https" else 80
    if sep:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UnsafeTarget("the URL's port is not valid")
        port = int(port_text)
    if not host:
        raise UnsafeTarget("the URL has no host")
    return scheme, host, port


# -- the SOCKS5 server ----------------------------------------------------------


@attrs.frozen(kw_only=True)
class Seal:
    """The one destination a call's proxy lets through."""

    host: str
    port: int
    addresses: tuple[IPAddress, ...]


@attrs.frozen(kw_only=True)
class EgressRules:
    """What an MCP server container may reach (12 "Egress"): exact (name, port) pairs
    (``arg:NAME``) or host patterns (``server``: without a port 443, with one that
    port; ``*.name`` any name below), up to `limit` CONNECTs."""

    exact: tuple[tuple[str, int], ...] = ()
    patterns: tuple[str, ...] = ()
    private_network: bool = False
    limit: int = 32

    def allows(self, host: str, port: int) -> bool:
        if (host, port) in self.exact:
            return True
        for text in self.patterns:
            name, colon, port_text = text.partition(":")
            if (int(port_text) if colon else 443) != port:
                continue
            if (name.startswith("*.") and host.endswith(name[1:])) or host == name:
                return True
        return False


@attrs.define(kw_only=True)
class Connection:
    """One CONNECT of an MCP server container, as ``result.source.egress`` records it."""

    host: str | None
    """The requested name when it is of the host grammar, else None."""
    port: int
    address: str | None = None
    """Where it went (or the address refused); None when not resolved."""
    bytes_out: int = 0
    bytes_in: int = 0
    refused: str | None = None
    """None, ``not_allowed``, ``address_not_allowed`` or ``limit``."""

    def record(self) -> dict[str, object]:
        """The record's fields, in 12's order (the attributes' order)."""
        return attrs.asdict(self)


# SOCKS5 reply codes (RFC 1928).
REP_OK = 0
REP_GENERAL_FAILURE = 1
REP_NOT_ALLOWED = 2
REP_HOST_UNREACHABLE = 4
REP_CONNECTION_REFUSED = 5
REP_COMMAND_NOT_SUPPORTED = 7
REP_ADDRESS_NOT_SUPPORTED = 8


def _reply(code: int) -> bytes:
    return bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0])


class _Buffered:
    """Exact reads from a trio stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = await self.stream.receive_some(4096)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


class EgressProxy:
    """A SOCKS5 server for one call: sealed to one host and port (`seal`, http_fetch),
    or to an MCP server's `rules` (names resolved by `resolver` once allowed)."""

    def __init__(self, seal: Seal | None = None, *, rules: EgressRules | None = None,
                 resolver: Resolver = system_resolver) -> None:
        if (seal is None) == (rules is None):
            raise ValueError("an egress proxy has a seal or rules, not both")
        self.seal = seal
        self.rules = rules
        self.resolver = resolver
        self.used = False
        self.refusals: list[str] = []
        self.connections: list[Connection] = []
        """Every CONNECT under `rules`, in order (http_fetch's are not kept)."""

    async def serve(
        self,
        listener: trio.SocketListener,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled; the listener is closed on the way out."""
        async with listener, trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._handle, stream)

    async def _handle(self, client: trio.SocketStream) -> None:
        async with client:
            try:
                with trio.fail_after(_SOCKS_TIMEOUT_S):
                    upstream = await self._negotiate(client)
            except (EOFError, trio.BrokenResourceError, trio.TooSlowError) as exc:
                log.info("egress: client went away during SOCKS negotiation (%r)", exc)
                return
            if upstream is None:
                return
            counted = self.connections[-1] if self.rules is not None else None
            async with upstream:
                await _relay(client, upstream, counted)

    async def _refuse(self, client: trio.SocketStream, code: int, why: str) -> None:
        self.refusals.append(why)
        log.info("egress: refused %s", why)
        await client.send_all(_reply(code))

    async def _negotiate(self, client: trio.SocketStream) -> trio.SocketStream | None:
        reader = _Buffered(client)
        version, count = await reader.read(2)
        methods = await reader.read(count)
        if version != 5 or 0 not in methods:
            self.refusals.append("bad greeting")
            await client.send_all(b"\x05\xff")
            return None
        await client.send_all(b"\x05\x00")
        version, command, _reserved, atyp = await reader.read(4)
        if atyp == 1:
            await reader.read(4)
            host = None
        elif atyp == 4:
            await reader.read(16)
            host = None
        elif atyp == 3:
            host_raw = await reader.read((await reader.read(1))[0])
            host = host_raw.decode("ascii", "replace")
        else:
            await self._refuse(client, REP_ADDRESS_NOT_SUPPORTED, "an unknown address type")
            return None
        port = int.from_bytes(await reader.read(2), "big")
        if version != 5 or command != 1:
            await self._refuse(client, REP_COMMAND_NOT_SUPPORTED, f"command {command}")
            return None
        if self.rules is not None:
            return await self._admit(client, self.rules, host, port)
        assert self.seal is not None
        if host is None:
            await self._refuse(client, REP_NOT_ALLOWED, "a CONNECT to an address literal")
            return None
        if host != self.seal.host or port != self.seal.port:
            why = f"a CONNECT to {escape_line(host)} port {port}"
            await self._refuse(client, REP_NOT_ALLOWED, why)
            return None
        if self.used:
            await self._refuse(client, REP_NOT_ALLOWED, "a second CONNECT")
            return None
        self.used = True
        upstream = await _connect_in_order(self.seal.addresses, self.seal.port)
        if upstream is None:
            await client.send_all(_reply(REP_HOST_UNREACHABLE))
            return None
        await client.send_all(_reply(REP_OK))
        return upstream[0]

    async def _admit(self, client: trio.SocketStream, rules: EgressRules, host: str | None,
                     port: int) -> trio.SocketStream | None:
        """12's order: the limit, the name against the allowed set (nothing resolved
        unless it matches), the addresses against the table, then connect."""
        named = host if host is not None and host_problem(host) is None else None
        shown = escape_line(host) if host is not None else "an address literal"
        if port == 0:
            # Not a port any record can carry (04-audit: 1..65535); the forwarder never
            # asks for it, so only a broken sidecar does: refused, in the daemon log.
            await self._refuse(client, REP_NOT_ALLOWED, f"a CONNECT to {shown} port 0")
            return None
        record = Connection(host=named, port=port)
        self.connections.append(record)
        if len(self.connections) > rules.limit:
            record.refused = "limit"
            await self._refuse(client, REP_NOT_ALLOWED, f"{shown}: past max_connections")
            return None
        if named is None or not rules.allows(named, port):
            record.refused = "not_allowed"
            await self._refuse(client, REP_NOT_ALLOWED, f"a CONNECT to {shown} port {port}")
            return None
        try:
            with trio.fail_after(_RESOLVE_TIMEOUT_S):
                addresses = await self.resolver(named, port)
        except (ResolveError, trio.TooSlowError) as exc:
            log.info("egress: %s did not resolve (%r)", shown, exc)
            await client.send_all(_reply(REP_HOST_UNREACHABLE))
            return None
        problem = vet_addresses(addresses, rules.private_network)
        if problem is not None:
            record.refused = "address_not_allowed"
            record.address = next((str(a) for a in addresses
                                   if address_problem(a, rules.private_network)), None)
            await self._refuse(client, REP_NOT_ALLOWED, f"{shown}: {problem}")
            return None
        upstream = await _connect_in_order(tuple(addresses), port)
        if upstream is None:
            record.address = str(addresses[-1])
            await client.send_all(_reply(REP_HOST_UNREACHABLE))
            return None
        record.address = str(upstream[1])
        await client.send_all(_reply(REP_OK))
        return upstream[0]


async def _connect_in_order(addresses: tuple[IPAddress, ...], port: int
                            ) -> tuple[trio.SocketStream, IPAddress] | None:
    for address in addresses:
        try:
            with trio.fail_after(_CONNECT_TIMEOUT_S):
                return await trio.open_tcp_stream(str(address), port), address
        except (OSError, trio.TooSlowError) as exc:
            log.info("egress: connecting to %s:%d failed (%r)", address, port, exc)
    return None


async def _pump(source: trio.abc.Stream, sink: trio.abc.HalfCloseableStream,
                counted: Connection | None = None, way: str = "") -> None:
    try:
        while chunk := await source.receive_some(65536):
            await sink.send_all(chunk)
            if counted is not None:
                if way == "out":
                    counted.bytes_out += len(chunk)
                else:
                    counted.bytes_in += len(chunk)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _relay(a: trio.SocketStream, b: trio.SocketStream,
                 counted: Connection | None = None) -> None:
    """Both ways; `counted` gets the bytes (out: from `a`, the container)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, a, b, counted, "out")
        nursery.start_soon(_pump, b, a, counted, "in")


async def open_unix_listener(path: Path) -> trio.SocketListener:
    """A listening Unix socket at `path` (the directory exists, mode 0700)."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(os.fspath(path))
        sock.listen(8)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)
