"""Egress for http_fetch (08-runner): address checks and the per-call SOCKS5 proxy.

brokerd resolves the host once, when the call is about to run, and refuses the
call unless every address (and every IPv4 address embedded in it) may be
reached; the vetted addresses are pinned.  For the call's life a SOCKS5 server
on a Unix socket in a per-call directory (mounted into the container) accepts
exactly one CONNECT, to the sealed host and port, connects it to a pinned
address, and refuses everything else.
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
from ._addresses import IPAddress, address_problem, embedded_ipv4, vet_addresses
from ._mounts import UnsafeTarget

log = logging.getLogger("boxmaker.brokerd.runner.egress")

__all__ = [  # the address checks live in _addresses; re-exported for the runner
    "EgressProxy", "IPAddress", "ResolveError", "Resolver", "Seal", "address_problem",
    "embedded_ipv4", "open_unix_listener", "split_url", "system_resolver", "vet_addresses",
]

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

_SOCKS_TIMEOUT_S = 10.0
_CONNECT_TIMEOUT_S = 10.0


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
    """A SOCKS5 server for one call, sealed to one host and port."""

    def __init__(self, seal: Seal) -> None:
        self.seal = seal
        self.used = False
        self.refusals: list[str] = []

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
            async with upstream:
                await _relay(client, upstream)

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
        upstream = await self._connect_pinned()
        if upstream is None:
            await client.send_all(_reply(REP_HOST_UNREACHABLE))
            return None
        await client.send_all(_reply(REP_OK))
        return upstream

    async def _connect_pinned(self) -> trio.SocketStream | None:
        for address in self.seal.addresses:
            try:
                with trio.fail_after(_CONNECT_TIMEOUT_S):
                    return await trio.open_tcp_stream(str(address), self.seal.port)
            except (OSError, trio.TooSlowError) as exc:
                log.info("egress: connecting to %s:%d failed (%r)", address, self.seal.port, exc)
        return None


async def _pump(source: trio.abc.Stream, sink: trio.abc.HalfCloseableStream) -> None:
    try:
        while chunk := await source.receive_some(65536):
            await sink.send_all(chunk)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _relay(a: trio.SocketStream, b: trio.SocketStream) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, a, b)
        nursery.start_soon(_pump, b, a)


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
