"""brokerd serving (05-brokerd "Serving"): start-up, both listeners, shutdown.

Start-up, in order: open the audit log (lock, verify, recover, accept a
break), rebuild the session taints from it and rewrite stale state files,
read the grants, choose the runtime, take the sockets (systemd's, or bind
them), record `start`, send READY=1.  Then each connection is a task; its
peer's uid is checked first.  SIGTERM/SIGINT (or `ServeHandle.stop`): stop
accepting, expire every pending approval (reason shutdown), let running tools
finish, record `stop`, return.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .. import __version__
from .._protected import ProtectedSet, protected_set
from .._sd import ActivationError, listen_fds, notify, unix_listener
from .._unix import (
    ListenerLost,
    PeerCred,
    SocketSetupError,
    accept_loop,
    bind_unix_listener,
    peer_credentials,
)
from ..policy._load import GrantsWatcher
from ..proto._audit import GrantsSummary, Start, Stop
from ..proto._convert import U64
from ..proto._wire import error_frame
from ._admin import handle_admin
from ._audit_link import AuditStartup, open_audit
from ._audit_writer import AuditUnavailable, FsyncFn, WriteFn
from ._broker import handle_broker, linger_close
from ._checkpoints_link import open_checkpoints
from ._config import BrokerdConfig
from ._context import Daemon
from ._ledger import Ledger
from ._passkeys import PasskeyRegistry
from ._policy_link import PolicyLink
from ._state import list_sessions, read_state, sync_state_files
from .runner._echo import EchoRuntime
from .runner._podman import PodmanRuntime
from .runner._podman_argv import PodmanSettings
from .runner._queue import RunQueue
from .runner._refusing import RefusingRuntime

log = logging.getLogger("brokerd")

SINGLE_UID_WARNING = (
    "one uid may both call tools (broker.sock) and approve them (admin.sock): a compromised "
    "loopd could approve its own calls; run loopd under a uid of its own (deploy/)"
)
FSYNC_OFF_WARNING = (
    "[audit] fsync = false: records are not flushed to disk (tests and benchmarks only)"
)

Handler = Callable[[trio.abc.Stream, PeerCred, Daemon], Awaitable[None]]


class StartFailed(Exception):
    """brokerd cannot start (config, socket paths, directories); `#brokerd-start-failed`."""


@attrs.define
class ServeHandle:
    """What `serve` hands its starter: the daemon, and a way to stop it."""

    daemon: Daemon
    broker_socket: str
    admin_socket: str
    listeners: tuple[trio.socket.SocketType, ...] = ()
    _stop: trio.Event = attrs.field(factory=trio.Event)
    stop_reason: str = "shutdown"

    def stop(self, reason: str = "shutdown") -> None:
        self.stop_reason = reason
        self._stop.set()

    async def wait_stop(self) -> None:
        await self._stop.wait()


def podman_settings(config: BrokerdConfig) -> PodmanSettings:
    """The podman keys of [runner] as the podman runtime takes them (ValueError if bad)."""
    table = config.runner
    if table.image is None:
        raise ValueError("runner.image is not set: name the tools image by digest")
    return PodmanSettings(
        image=table.image, podman=table.podman, oci_runtime=table.oci_runtime,
        memory=table.memory, pids=table.pids, cpus=table.cpus,
        timeout_ms=table.timeout_ms, output_max_bytes=table.output_max_bytes,
        nofile=table.nofile, nproc=table.nproc,
    )


def runner_settings_problem(config: BrokerdConfig) -> str | None:
    """Why the podman settings are not valid (None when they are, or another runner)."""
    if config.runner.kind != "podman" or config.runner.image is None:
        return None
    try:
        podman_settings(config)
    except ValueError as exc:
        return str(exc)
    return None


def compute_protected(config: BrokerdConfig) -> ProtectedSet:
    """brokerd's protected roots (03-policy D2b, issue 10): THE shared function,
    fed with brokerd's paths (blocking: realpath, stat and `podman info`)."""
    podman = config.runner.podman if config.runner.kind == "podman" else None
    return protected_set(config.own_protected, config.policy_protected, podman=podman,
                         oci_runtime=config.runner.oci_runtime if podman else None)


async def make_runtime(config: BrokerdConfig, protected: ProtectedSet | None = None) -> Any:
    """The configured runtime, checked (podman: podman runs, the image is there, limits hold).

    Raises StartFailed for podman settings that are not valid.
    """
    kind = config.runner.kind
    if kind == "echo":
        return EchoRuntime()
    if kind == "podman":
        if config.runner.image is None:
            return RefusingRuntime("[runner] image is not set: name the tools image by digest")
        try:
            settings = podman_settings(config)
        except ValueError as exc:
            raise StartFailed(f"the [runner] settings are not valid: {exc}") from exc
        if protected is None:
            protected = await trio.to_thread.run_sync(compute_protected, config)
        runtime = PodmanRuntime(settings, config.home, protected=protected)
        await runtime.start()
        return runtime
    return RefusingRuntime()


def _take_sockets(config: BrokerdConfig) -> tuple[socket.socket, socket.socket]:
    try:
        activated = listen_fds()
        if activated:
            broker = unix_listener(activated, "broker")
            admin = unix_listener(activated, "admin")
            if broker is None or admin is None:
                raise StartFailed(
                    "socket activation did not pass both sockets "
                    "(LISTEN_FDNAMES needs broker and admin)"
                )
            return broker, admin
    except ActivationError as exc:
        raise StartFailed(str(exc)) from exc
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


def _damaged_state_warnings(config: BrokerdConfig, head: int | None,
                            rebuilt: set[str]) -> list[str]:
    """State files of sessions the log does not know, that are damaged or unreadable."""
    out = []
    for session in list_sessions(config.sessions_dir):
        if session in rebuilt:
            continue
        state = read_state(config.sessions_dir, session, head_seq=head)
        if state is not None and state.problem is not None:
            log.warning("session %s: state file %s (%s); used as secret + untrusted. "
                        "See docs/runbook.md#broker-state-damaged",
                        session, state.problem, state.detail)
            out.append(f"session {session}: state file {state.problem}; used as secret + untrusted")
    return out


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
    writer = startup.writer
    warnings: list[str] = []
    found = startup.report
    if found is not None:
        if found.recovery is not None:
            log.warning("audit: a torn last line was closed off (recovery record %d)",
                        found.recovery.seq)
        if found.break_record is not None:
            log.warning("audit: --accept-break recorded a break (record %d) over %d failure(s)",
                        found.break_record.seq, len(found.chain.unaccepted))
        if found.unfinished_calls:
            log.info("audit: calls that were running when brokerd stopped: %s",
                     ", ".join(str(c) for c in found.unfinished_calls))
    if not config.fsync:
        log.warning(FSYNC_OFF_WARNING)
        warnings.append(FSYNC_OFF_WARNING)
    report = sync_state_files(config.sessions_dir, startup.taints, head_seq=startup.head_seq,
                              fsync=config.fsync)
    for failure in report.failed:
        log.warning("state file not rewritten: %s", failure)
    if report.rewritten:
        log.info("state files rewritten from the audit log: %s", ", ".join(report.rewritten))
    warnings += _damaged_state_warnings(config, startup.head_seq, set(startup.taints))
    watcher = GrantsWatcher(config.grants)
    grants, _ = watcher.refresh()
    if not grants.ok:
        if getattr(grants, "missing", False):
            log.warning("the grants directory %r does not exist; every call is denied. "
                        "See docs/runbook.md#grants-missing", os.fsdecode(config.grants))
        else:
            log.warning("the grant set has %d problems; every call is denied. "
                        "See docs/runbook.md#grants-invalid", len(grants.report.problems))
    problem = runner_settings_problem(config)
    if problem is not None:  # before `podman info`: a bad setting fails at once
        raise StartFailed(f"the [runner] settings are not valid: {problem}")
    protected = await trio.to_thread.run_sync(compute_protected, config)
    if protected.missing or protected.unknown:
        log.warning("protected roots missing or unknown: %s; no file tool runs. "
                    "See docs/runbook.md#runner-unavailable",
                    ", ".join([*protected.missing, *protected.unknown]))
    runtime = await make_runtime(config, protected)
    if not runtime.ok:
        log.warning("runner %s: %s; allowed calls answer runner_unavailable. "
                    "See docs/runbook.md#runner-unavailable", runtime.kind, runtime.reason)
    if config.single_uid:
        log.warning("%s", SINGLE_UID_WARNING)
        warnings.append(SINGLE_UID_WARNING)
    passkeys = PasskeyRegistry(rp_id=config.rp_id, origins=config.origins,
                               clock=trio.current_time)
    for record in startup.passkey_records:
        passkeys.feed(record)
    checkpoints: Any = None
    try:
        checkpoints = open_checkpoints(config, writer, new_key=new_checkpoint_key,
                                       wall_clock=time.time)
        warnings += checkpoints.warnings
    except OSError as exc:  # the tree's stored hashes cannot be kept: the log still works
        off = (f"checkpoints are off: the Merkle tree's stored hashes cannot be written "
               f"under {os.fsdecode(config.audit)} ({exc.strerror or exc}); calls are "
               "decided and recorded as ever, nothing is signed or sent to witnesses "
               "(docs/checkpoints.md)")
        log.warning("%s", off)
        warnings.append(off)
    if startup.passkeys_dropped:
        dropped = ("the passkeys enrolled before the audit log's accepted break are not "
                   "trusted: enrol again (bxctl passkey add). See docs/runbook.md#passkey-required")
        log.warning("%s", dropped)
        warnings.append(dropped)
    link = PolicyLink.of(protected.spellings)
    ledger = Ledger(writer=writer, sessions_dir=config.sessions_dir, taints=startup.taints,
                    link=link, known_sessions=startup.known_sessions, state_fsync=config.fsync,
                    state_in_thread=state_in_thread, ttl_ms=config.ttl_ms)
    run_queue = RunQueue(max_concurrent=config.max_concurrent, max_queued=config.max_queued,
                         timeout_s=config.queue_timeout_ms / 1000)
    daemon = Daemon(config=config, ledger=ledger, watcher=watcher, runtime=runtime,
                    link=link, version=__version__,
                    warnings=warnings, passkeys=passkeys, checkpoints=checkpoints,
                    run_queue=run_queue)
    try:
        broker_std, admin_std = _take_sockets(config)
    except SocketSetupError as exc:
        raise StartFailed(str(exc)) from exc
    broker_sock = trio.socket.from_stdlib_socket(broker_std)
    admin_sock = trio.socket.from_stdlib_socket(admin_std)
    handle = ServeHandle(daemon=daemon, broker_socket=os.fsdecode(config.broker_socket),
                         admin_socket=os.fsdecode(config.admin_socket),
                         listeners=(broker_sock, admin_sock))
    lost: ListenerLost | None = None
    signals_cm: Any = (
        trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) if handle_signals
        else contextlib.nullcontext(None)
    )
    try:
        with signals_cm as signals:
            summary = grants.report
            await ledger.record([Start(
                version=__version__, pid=U64(os.getpid()),
                grants=GrantsSummary(ok=summary.ok, count=U64(summary.count),
                                     digest=summary.digest),
            )])
            log.info("brokerd %s serving: broker %s, admin %s", __version__,
                     handle.broker_socket, handle.admin_socket)
            notify("READY=1")
            task_status.started(handle)
            async with trio.open_nursery() as background:
                background.start_soon(ledger.run_state_writer)
                if checkpoints is not None:
                    background.start_soon(checkpoints.run)
                async with trio.open_nursery() as connections:
                    async with trio.open_nursery() as front:

                        async def listen(sock: trio.socket.SocketType, name: str,
                                         allowed: frozenset[int], handler: Handler) -> None:
                            nonlocal lost

                            async def one(conn: trio.socket.SocketType) -> None:
                                await _connection(conn, name, allowed, handler, daemon)

                            try:
                                await accept_loop(sock, one, connections, name=name,
                                                  max_connections=config.max_connections)
                            except ListenerLost as exc:
                                lost = exc
                                handle.stop("listener lost")

                        front.start_soon(listen, broker_sock, "broker.sock",
                                         frozenset(config.broker_uids), handle_broker)
                        front.start_soon(listen, admin_sock, "admin.sock",
                                         frozenset({config.owner_uid}), handle_admin)
                        front.start_soon(_sweep, daemon)
                        if signals is not None:
                            front.start_soon(_watch_signals, handle, signals)
                        await handle.wait_stop()
                        front.cancel_scope.cancel()
                    # Stop accepting, then let what runs finish.
                    broker_sock.close()
                    admin_sock.close()
                    notify("STOPPING=1")
                    daemon.stopping = True
                    for scope in list(daemon.idle_scopes):
                        scope.cancel()
                    with trio.CancelScope(shield=True):
                        await ledger.expire(ledger.pending.take_all(), reason="shutdown")
                with trio.CancelScope(shield=True):
                    try:
                        await ledger.record([Stop(reason=handle.stop_reason)])
                    except AuditUnavailable as exc:
                        log.error("stop not recorded: %s", exc)
                    await ledger.flush_states()
                    await runtime.aclose()
                    if checkpoints is not None:
                        await checkpoints.stop()
                background.cancel_scope.cancel()
    finally:
        broker_sock.close()
        admin_sock.close()
    if lost is not None:
        raise lost


async def _sweep(daemon: Daemon) -> None:
    from ._approvals import run_expiry_sweep

    await run_expiry_sweep(daemon.ledger.pending, daemon.ledger.expire)


async def _watch_signals(handle: ServeHandle, signals: Any) -> None:
    """SIGTERM/SIGINT: stop cleanly (the receiver is open from before READY=1)."""
    async for signum in signals:
        log.info("brokerd: %s, shutting down", signal.Signals(signum).name)
        handle.stop("shutdown")
        return


async def _connection(sock: trio.socket.SocketType, name: str, allowed: frozenset[int],
                      handler: Handler, daemon: Daemon) -> None:
    """One connection: the peer's uid first, then its handler; failures stay here."""
    stream = trio.SocketStream(sock)
    try:
        try:
            peer = peer_credentials(sock)
        except OSError as exc:
            log.warning("%s: peer credentials unavailable (%s); connection closed", name, exc)
            return
        if peer.uid not in allowed:
            log.warning("%s: refused a peer with uid %d (pid %d): not allowed on this socket. "
                        "See docs/runbook.md#forbidden-peer", name, peer.uid, peer.pid)
            await stream.send_all(_forbidden_frame(name, peer.uid))
            await linger_close(stream)
            return
        await handler(stream, peer, daemon)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    except Exception:
        log.exception("%s: a connection failed (contained; brokerd goes on serving)", name)
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


def _forbidden_frame(name: str, uid: int) -> bytes:
    from ..proto._framing import encode_frame

    return encode_frame(error_frame(
        None, "forbidden",
        f"uid {uid} may not connect to {name}. See docs/runbook.md#forbidden-peer",
        "docs/runbook.md#forbidden-peer",
    ))
