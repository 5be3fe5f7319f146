"""`boxmaker approvals serve`: the approval page under trio and h11 (HTTP/1.1 only).

Thin: it builds the app from the config (TLS with the owner's certificate,
or the local CA's), serves it with `_http11.serve_tcp` (the witness's server:
bounded bodies, deadlines, ALPN `http/1.1` alone) through a small ASGI
bridge, and reports the bound addresses.  No request can end the server: a
failure in one request is answered 500 and stays in that request, a failure
in one connection stays in that connection (issue 22 item 1: hypercorn's
HTTP/2 let one unauthenticated POST end the process).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from .._grant_mounts import command_mounts
from .._http._http11 import Handler, HttpRequest, HttpResponse, serve_tcp, server_tls
from .._malloc import trim
from ._admin_client import AdminPort
from ._app import CSP, PageApp
from ._config import PageConfig
from ._history import LogTail, TaintHistory
from ._tls import ensure_local_ca

log = logging.getLogger("boxmaker.approvals")

MAX_CONNECTIONS = 64
"""The phone and a laptop need a few; the rest wait in the kernel's queue."""
TRIM_EVERY = 64
"""Connections closed between two trims of the C heap (`_malloc.trim`)."""


class HeapTrimmer:
    """Gives the C heap's free pages back every `every` closed connections.

    Each TLS connection leaves OpenSSL's and trio's freed buffers in glibc's heap,
    scattered among what stays alive, so the heap's resident size crept up by about
    1 MB per 1,000 connections while what is in use after a collection stayed the
    same (issue 23 goal 6).  One trim per 64 connections costs well under a
    millisecond."""

    def __init__(self, every: int = TRIM_EVERY, give_back: Callable[[], object] = trim) -> None:
        self.every = every
        self.give_back = give_back
        self.closed = 0

    def __call__(self) -> None:
        self.closed += 1
        if self.closed % self.every == 0:
            self.give_back()


@attrs.frozen(kw_only=True)
class Served:
    binds: list[str]
    url: str
    ca_cert: Path | None
    """The local CA to install on the phone, when the page made one."""


def _tls_files(config: PageConfig) -> tuple[Path | None, Path | None, Path | None]:
    if not config.tls:
        return None, None, None
    if config.tls_cert is not None and config.tls_key is not None:
        return config.tls_cert, config.tls_key, None
    made = ensure_local_ca(config.home / "approvals", config.rp_id)
    return made.cert, made.key, made.ca_cert


def make_app(config: PageConfig) -> PageApp:
    port = AdminPort(config.admin_socket, brokerd_uid=config.brokerd_uid)
    history = TaintHistory()
    tail = LogTail(config.audit, history)
    lock = trio.Lock()

    async def refresh() -> None:
        async with lock:
            await trio.to_thread.run_sync(tail.poll)

    grants = config.home / "grants"
    grants_lock = trio.Lock()

    async def mounts_of(grant: str) -> list[tuple[str, bool]] | None:
        async with grants_lock:
            return await trio.to_thread.run_sync(command_mounts, grants, grant)

    return PageApp(origin=config.origin, ask=port.ask, clock=trio.current_time,
                   history=history, refresh_history=refresh, mounts_of=mounts_of)


_SECURITY = (("content-security-policy", CSP), ("x-content-type-options", "nosniff"),
             ("x-frame-options", "DENY"), ("referrer-policy", "no-referrer"),
             ("cache-control", "no-store"))


def own_answer(status: int, reason: str) -> HttpResponse:
    """What the server says itself (400, 413), worded as the app's errors are."""
    code = {413: "too_large"}.get(status, "bad_request")
    body = json.dumps({"error": {"code": code, "message": reason}}).encode()
    return HttpResponse(status=status, body=body, content_type="application/json",
                        headers=_SECURITY)


def bridge(app: PageApp) -> Handler:
    """The app (ASGI) as an `_http11` handler: the whole body, read and bounded by
    `_http11`, is handed over in one message; the answer is collected."""

    async def handle(request: HttpRequest) -> HttpResponse:
        path, _, query = request.target.partition("?")
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": request.method, "scheme": "http", "path": path,
                 "raw_path": path.encode("latin-1"), "query_string": query.encode("latin-1"),
                 "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                             for k, v in request.headers]}
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:  # the app reads the body once; asking again is a disconnect
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": request.body, "more_body": False}

        started: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))

        try:
            await app(scope, receive, send)
        except Exception:
            log.exception("a request failed (answered 500, the page goes on)")
            return own_answer(500, "the page failed on this request")
        if "status" not in started:
            log.error("the app gave no answer (answered 500)")
            return own_answer(500, "the page failed on this request")
        kind, headers = "application/octet-stream", []
        for raw_name, raw_value in started.get("headers", []):
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            if name == "content-type":
                kind = value
            elif name != "content-length":
                headers.append((name, value))
        return HttpResponse(status=int(started["status"]), body=b"".join(chunks),
                            content_type=kind, headers=tuple(headers))

    return handle


async def serve(config: PageConfig, *,
                task_status: trio.TaskStatus[Served] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the page until cancelled."""
    cert, key, ca_cert = _tls_files(config)
    context = server_tls(str(cert), str(key)) if cert is not None and key is not None else None
    handler = bridge(make_app(config))
    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(partial(
            serve_tcp, handler, config.host, config.port, ssl_context=context,
            own_answer=own_answer, max_connections=MAX_CONNECTIONS,
            after_close=HeapTrimmer()))
        scheme = "https" if context is not None else "http"
        binds = []
        for listener in listeners:
            host, port = listener.socket.getsockname()[:2]
            binds.append(f"{scheme}://[{host}]:{port}" if ":" in host
                         else f"{scheme}://{host}:{port}")
        task_status.started(Served(binds=binds, url=config.origin + "/", ca_cert=ca_cert))
