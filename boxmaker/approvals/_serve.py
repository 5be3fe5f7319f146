"""`boxmaker approvals serve`: the approval page under trio and hypercorn.

Thin: it builds the app from the config (TLS with the owner's certificate,
or the local CA's), starts hypercorn with `nursery.start`, and reports the
bound addresses.  A failure in one request stays in that request (hypercorn
answers 500 and keeps serving).
"""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from ._admin_port import AdminPort
from ._app import PageApp
from ._config import PageConfig
from ._history import LogTail, TaintHistory
from ._tls import ensure_local_ca

log = logging.getLogger("boxmaker.approvals")


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

    return PageApp(origin=config.origin, ask=port.ask, clock=trio.current_time,
                   history=history, refresh_history=refresh)


async def serve(config: PageConfig, *,
                task_status: trio.TaskStatus[Served] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the page until cancelled."""
    cert, key, ca_cert = _tls_files(config)
    settings = HypercornConfig()
    settings.bind = [config.bind]
    settings.accesslog = None
    settings.errorlog = log
    settings.include_server_header = False
    if cert is not None and key is not None:
        settings.certfile, settings.keyfile = str(cert), str(key)
    app = make_app(config)
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(hypercorn_serve, app, settings)
        task_status.started(Served(binds=binds, url=config.origin + "/", ca_cert=ca_cert))
