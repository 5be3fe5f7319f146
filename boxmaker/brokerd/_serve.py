"""brokerd serving (05-brokerd "Serving"): start-up, both listeners, shutdown.

Start-up, in order: open the audit log (lock, verify, recover, accept a
break) and build the daemon over it (`_startup`: state files, grants,
runtime, passkeys, checkpoints), take the sockets (systemd's, or bind them),
record `start`, send READY=1.  Then broker.sock and admin.sock are served by
the connection shell (`boxmaker._sockets._framed_server`: peer uid, one frame with
its deadline, bad frames answered) with `_broker` and `_admin` as their
handlers.  SIGTERM/SIGINT (or `ServeHandle.stop`): stop accepting, close the
connections still waiting for a request, expire every pending approval
(reason shutdown), let running tools finish, record `stop`, return.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
from typing import Any

import attrs
import trio

from .. import __version__
from .._brokerd_config import BrokerdConfig
from .._error_table import condition, shown
from .._errors import StartFailed
from .._sockets._framed_server import FramedServer, FramedSocket, Wording
from .._sockets._sd import ActivationError, listen_fds, notify, unix_listener
from .._sockets._unix import ListenerLost, SocketSetupError, bind_unix_listener
from ..policy._model import GrantState
from ..proto._convert import U64
from ..proto.audit import ApprovalRecord, GrantsSummary, Start, Stop
from ..proto.wire import AdminRequest, BrokerRequest, decode_admin_request, decode_broker_request
from ._admin import handle_admin
from ._broker import handle_broker
from ._context import Daemon
from ._startup import prepare_daemon
from .log._audit_link import AuditStartup, open_audit
from .log._audit_writer import AuditUnavailable, FsyncFn, WriteFn

__all__ = ["BROKERD_WORDING", "ServeHandle", "StartFailed", "serve"]

log = logging.getLogger("brokerd")

BROKERD_WORDING = Wording(
    forbidden="uid {uid} may not connect to {name}. See " + condition("forbidden_peer"),
    bad_header="bad frame: {error}. See " + condition("bad_frame"),
    undecodable="the request does not decode: {error}",
    bad_version=None,
    no_frame="no request frame within {seconds:g} s",
)
"""What the shell's error frames say on broker.sock and admin.sock."""


@attrs.define
class ServeHandle:
    """What `serve` hands its starter: the daemon, and a way to stop it."""

    daemon: Daemon
    broker_socket: str
    admin_socket: str
    listeners: tuple[trio.socket.SocketType, ...] = ()
    _stop: trio.Event = attrs.field(factory=trio.Event)
    stop_reason: str = "shutdown"
    lost: ListenerLost | None = None
    """The first listener lost (brokerd then stops, and `serve` raises it)."""

    def stop(self, reason: str = "shutdown") -> None:
        self.stop_reason = reason
        self._stop.set()

    async def wait_stop(self) -> None:
        await self._stop.wait()


def _take_sockets(config: BrokerdConfig) -> tuple[socket.socket, socket.socket]:
    try:
        activated = listen_fds()
        if activated:
            broker = unix_listener(activated, "broker")
            admin = unix_listener(activated, "admin")
            if broker is None or admin is None:
                raise StartFailed(
                    "brokerd", "socket activation did not pass both sockets "
                    "(LISTEN_FDNAMES needs broker and admin)"
                )
            return broker, admin
    except ActivationError as exc:
        raise StartFailed("brokerd", str(exc)) from exc
    own = config.own_uid
    broker_open = any(u != own for u in config.broker_uids)
    admin_open = config.owner_uid != own
    same_dir = config.broker_socket.parent == config.admin_socket.parent
    broker = bind_unix_listener(
        config.broker_socket, own_uid=own, open_socket=broker_open,
        shared_dir=broker_open or (same_dir and admin_open),
    )
    try:
        admin = bind_unix_listener(
            config.admin_socket, own_uid=own, open_socket=admin_open,
            shared_dir=admin_open or (same_dir and broker_open),
        )
    except BaseException:
        broker.close()
        raise
    return broker, admin


async def serve(
    config: BrokerdConfig,
    *,
    accept_break: bool = False,
    new_checkpoint_key: bool = False,
    fsync: FsyncFn | None = None,
    write: WriteFn = os.write,
    state_in_thread: bool = True,
    handle_signals: bool = False,
    task_status: trio.TaskStatus[ServeHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run brokerd until stopped.  Raises StartFailed, AuditError, ListenerLost.

    `fsync`: the writer's fsync (default: in a worker thread; None with
    `[audit] fsync = false`).  Tests under a mock clock pass an inline one.
    """
    startup: AuditStartup = await open_audit(config, accept_break=accept_break, fsync=fsync,
                                             write=write)
    writer = startup.writer
    try:
        await _serve_with_log(config, startup, state_in_thread=state_in_thread,
                              handle_signals=handle_signals, task_status=task_status,
                              new_checkpoint_key=new_checkpoint_key)
    finally:
        with trio.CancelScope(shield=True):
            await writer.aclose()


async def _serve_with_log(
    config: BrokerdConfig,
    startup: AuditStartup,
    *,
    state_in_thread: bool,
    handle_signals: bool,
    task_status: trio.TaskStatus[ServeHandle],
    new_checkpoint_key: bool,
) -> None:
    prepared = await prepare_daemon(config, startup, state_in_thread=state_in_thread,
                                    new_checkpoint_key=new_checkpoint_key)
    daemon = prepared.daemon
    try:
        broker_std, admin_std = _take_sockets(config)
    except SocketSetupError as exc:
        raise StartFailed("brokerd", str(exc)) from exc
    broker_sock = trio.socket.from_stdlib_socket(broker_std)
    admin_sock = trio.socket.from_stdlib_socket(admin_std)
    handle = ServeHandle(daemon=daemon, broker_socket=os.fsdecode(config.broker_socket),
                         admin_socket=os.fsdecode(config.admin_socket),
                         listeners=(broker_sock, admin_sock))
    signals_cm: Any = (
        trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) if handle_signals
        else contextlib.nullcontext(None)
    )
    try:
        with signals_cm as signals:
            await _record_start(daemon, prepared.grants,
                                [*prepared.sources_events, *startup.abandoned])
            log.info("brokerd %s serving: broker %s, admin %s", __version__,
                     handle.broker_socket, handle.admin_socket)
            notify("READY=1")
            task_status.started(handle)
            await _run(daemon, handle, signals)
    finally:
        broker_sock.close()
        admin_sock.close()
    if handle.lost is not None:
        raise handle.lost


async def _record_start(daemon: Daemon, grants: GrantState,
                        after: list[Any]) -> None:
    """`start`, then the first `sources` record (12-tool-sources), then an `abandoned`
    approval for each ask left pending by a kill -9."""
    abandoned = [event for event in after if isinstance(event, ApprovalRecord)]
    summary = grants.report
    await daemon.ledger.record([Start(
        version=__version__, pid=U64(os.getpid()),
        grants=GrantsSummary(ok=summary.ok, count=U64(summary.count), digest=summary.digest),
    ), *after])
    if abandoned:
        log.info("audit: asks pending when brokerd stopped, closed as abandoned: %s",
                 ", ".join(str(a.call) for a in abandoned))


def _framed_sockets(daemon: Daemon) -> tuple[FramedSocket[BrokerRequest],
                                              FramedSocket[AdminRequest]]:
    """broker.sock and admin.sock as the connection shell serves them."""
    config = daemon.config
    broker = FramedSocket(
        name="broker.sock", allowed_uids=frozenset(config.broker_uids),
        decode=decode_broker_request, wording=BROKERD_WORDING,
        handle=lambda stream, peer, request: handle_broker(stream, peer, daemon, request),
        max_connections=config.max_connections,
    )
    admin = FramedSocket(
        name="admin.sock", allowed_uids=frozenset({config.owner_uid}),
        decode=decode_admin_request, wording=BROKERD_WORDING,
        handle=lambda stream, peer, request: handle_admin(stream, peer, daemon, request),
        max_connections=config.max_connections,
    )
    return broker, admin


async def _run(daemon: Daemon, handle: ServeHandle, signals: Any) -> None:
    """Serve until stopped, then shut down in order (the module's docstring)."""
    ledger = daemon.ledger
    shell = FramedServer()
    broker, admin = _framed_sockets(daemon)
    broker_sock, admin_sock = handle.listeners

    def lost(exc: ListenerLost) -> None:
        if handle.lost is None:
            handle.lost = exc
        handle.stop("listener lost")

    async with trio.open_nursery() as background:
        background.start_soon(ledger.run_state_writer)
        # The runtimes' work behind the answers (command containers' removals).
        await background.start(daemon.runtimes.serve)
        if daemon.checkpoints is not None:
            background.start_soon(daemon.checkpoints.run)
        async with trio.open_nursery() as served:
            await served.start(functools.partial(shell.serve, broker_sock, broker, on_lost=lost))
            await served.start(functools.partial(shell.serve, admin_sock, admin, on_lost=lost))
            async with trio.open_nursery() as front:
                front.start_soon(_sweep, daemon)
                if signals is not None:
                    front.start_soon(_watch_signals, handle, signals)
                await handle.wait_stop()
                # Stop accepting first: the sweep's and the signal watcher's
                # teardown below is a checkpoint the accept loops must not use.
                shell.stop_accepting()
                front.cancel_scope.cancel()
            # Then let what runs finish.
            broker_sock.close()
            admin_sock.close()
            notify("STOPPING=1")
            daemon.stopping = True
            shell.stop_reading()
            with trio.CancelScope(shield=True):
                await ledger.expire(ledger.pending.take_all(), reason="shutdown")
        with trio.CancelScope(shield=True):
            try:
                await ledger.record([Stop(reason=handle.stop_reason)])
            except AuditUnavailable as exc:
                log.error("stop not recorded: %s", shown(str(exc), exc))
            await ledger.flush_states()
            await daemon.runtimes.aclose()
            if daemon.checkpoints is not None:
                await daemon.checkpoints.stop()
        background.cancel_scope.cancel()


async def _sweep(daemon: Daemon) -> None:
    from ._approvals import run_expiry_sweep

    await run_expiry_sweep(daemon.ledger.pending, daemon.ledger.expire)


async def _watch_signals(handle: ServeHandle, signals: Any) -> None:
    """SIGTERM/SIGINT: stop cleanly (the receiver is open from before READY=1)."""
    async for signum in signals:
        log.info("brokerd: %s, shutting down", signal.Signals(signum).name)
        handle.stop("shutdown")
        return
