"""inferproxy's connection to the inference server: the shared h11 client, over TCP or TLS.

The connection is `boxmaker._http.HttpConnection` (its response head and body
reading, its errors), whose streamed request (`send_head`, `send_body_data`,
`send_end`) sends the client's body piece by piece as it arrives, so that no
body is ever held whole.  `open_upstream` connects over TCP, and over TLS for
an ``https://`` upstream (verified against the system CA store, or only
against `ca_file` when one is set).
"""

from __future__ import annotations

import math
import ssl
from pathlib import Path

import trio

from .._http import Endpoint, InferenceTimeout, InferenceUnavailable, shown
from .._http.client import HttpConnection
from ._config import Upstream

CONNECT_TIMEOUT_S = 10.0


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
            f" {shown(str(cause))}"
        ) from exc
    return ssl_stream


async def open_upstream(upstream: Upstream, *, tls: ssl.SSLContext | None,
                        timeout_s: float | None = CONNECT_TIMEOUT_S) -> HttpConnection:
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
                f" {shown(exc.strerror or str(exc))}"
            ) from exc
        if upstream.tls:
            if tls is None:
                raise ValueError("an https upstream needs a TLS context")
            try:
                stream = await _handshake(stream, upstream, tls)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
        return HttpConnection(stream, endpoint)
    assert scope.cancelled_caught
    raise InferenceTimeout(
        f"cannot connect to the inference server at {upstream} within {timeout_s} s",
        phase="connect",
    )
