"""inferproxy's connection to the inference server: loopd's h11 client, streamed both ways.

`UpstreamConnection` is loopd's `HttpConnection` (the same h11 client: its
response head and body reading, its errors) with what a proxy needs on top:
the request head and the request body sent separately, piece by piece as
they arrive from the client, so that no body is ever held whole.  `open_upstream`
connects over TCP, and over TLS for an ``https://`` upstream (verified
against the system CA store, or only against `ca_file` when one is set).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Sequence
from pathlib import Path

import h11
import trio

from ..loopd._http import (
    Endpoint,
    HttpConnection,
    InferenceTimeout,
    InferenceUnavailable,
    shown,
)
from ._config import Upstream

CONNECT_TIMEOUT_S = 10.0


class UpstreamConnection(HttpConnection):
    """One request to the server, its body streamed: head, data..., end."""

    async def send_head(self, method: bytes, target: bytes,
                        headers: Sequence[tuple[bytes, bytes]]) -> None:
        """Send the request head; the framing headers in `headers` decide the body's form."""
        try:
            data = self._h11.send(h11.Request(method=method, target=target, headers=list(headers)))
        except h11.LocalProtocolError as exc:
            raise ValueError(f"cannot send this request: {exc}") from exc
        await self._send_all(data)

    async def send_body_data(self, data: bytes) -> None:
        """Send one piece of the request body as it is."""
        if not data:
            return
        out = self._h11.send(h11.Data(data=data))
        if out:
            await self._send_all(out)

    async def send_end(self) -> None:
        """End the request body (the terminating chunk when chunked)."""
        out = self._h11.send(h11.EndOfMessage())
        if out:
            await self._send_all(out)


def tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """Certificate and host name verification on; `ca_file` replaces the system store.

    Raises OSError or ssl.SSLError when `ca_file` cannot be loaded.
    """
    if ca_file is None:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=str(ca_file))


async def _handshake(stream: trio.abc.Stream, upstream: Upstream,
                     tls: ssl.SSLContext) -> trio.SSLStream[trio.abc.Stream]:
    ssl_stream = trio.SSLStream(stream, tls, server_hostname=upstream.host,
                                https_compatible=True)
    try:
        await ssl_stream.do_handshake()
    except (trio.BrokenResourceError, OSError) as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        raise InferenceUnavailable(
            f"the TLS handshake with the inference server at {upstream} failed:"
            f" {shown(str(cause))} docs/runbook.md#inference-unavailable"
        ) from exc
    return ssl_stream


async def open_upstream(upstream: Upstream, *, tls: ssl.SSLContext | None,
                        timeout_s: float | None = CONNECT_TIMEOUT_S) -> UpstreamConnection:
    """Connect (and for https, finish the TLS handshake) within `timeout_s`.

    Raises `InferenceUnavailable` (its `InferenceTimeout` for the time limit).
    """
    endpoint = Endpoint.tcp(upstream.host, upstream.port)
    with trio.move_on_after(math.inf if timeout_s is None else timeout_s) as scope:
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(upstream.host, upstream.port)
        except OSError as exc:
            raise InferenceUnavailable(
                f"cannot connect to the inference server at {upstream}:"
                f" {shown(exc.strerror or str(exc))} docs/runbook.md#inference-unavailable"
            ) from exc
        if upstream.tls:
            if tls is None:
                raise ValueError("an https upstream needs a TLS context")
            try:
                stream = await _handshake(stream, upstream, tls)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
        return UpstreamConnection(stream, endpoint)
    assert scope.cancelled_caught
    raise InferenceTimeout(
        f"cannot connect to the inference server at {upstream} within {timeout_s} s"
        " docs/runbook.md#inference-unavailable",
        phase="connect",
    )
