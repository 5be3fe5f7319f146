"""inferproxy's listener and lifetime (06-loopd, 05-brokerd "Serving" for the socket rules).

`prepare` turns the config into `ProxySettings` (reading the key file and the
CA file) and `open_listener` takes the socket from systemd (the one named
``infer``) or binds it: the directory created 0700 if missing, an existing one
owned by our uid and not writable by group or others, no symbolic link in any
existing component, not directly in ``/``, only a stale socket replaced; the
socket file 0600.  Who may connect is decided by the file system: a bound
socket only by inferproxy's own uid (and root); an activated one by the socket
unit's ``SocketUser=``/``SocketMode=`` (docs/decisions.md).  Both raise
`StartFailed`.

`serve` accepts connections, one task each, and never lets one connection's
failure stop it.  `run` is the whole life: prepare, listen, ``READY=1``, serve
until SIGTERM or SIGINT, ``STOPPING=1``, remove the socket it bound.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import ssl
import stat
from pathlib import Path
from typing import Final

import attrs
import trio

from .._errors import ConfigError, StartFailed
from .._sockets import _sd
from .._sockets._unix import SocketSetupError, bind_unix_listener
from .._sockets._unix_accept import accept_loop
from ..proto._escape import escape_line
from ._config import InferproxyConfig, key_file_is_shared, read_api_key
from ._proxy import ProxySettings, handle_connection
from ._upstream import tls_context

log = logging.getLogger("inferproxy")

SOCKET_NAME: Final = "infer"

@attrs.frozen(kw_only=True)
class Listener:
    """The listening socket and, when inferproxy bound it, its path (removed at exit)."""

    sock: socket.socket
    bound_path: Path | None
    activated: bool
    bound_identity: tuple[int, int, int] | None = None  # st_dev, st_ino, st_ctime_ns


def _show(path: Path) -> str:
    return escape_line(os.fsdecode(path))


def prepare(config: InferproxyConfig) -> ProxySettings:
    """The settings every connection uses: the key read, the TLS context built."""
    api_key: str | None = None
    if config.api_key_file is not None:
        try:
            api_key = read_api_key(config.api_key_file)
        except ConfigError as exc:
            raise StartFailed("inferproxy", str(exc)) from exc
        if key_file_is_shared(config.api_key_file):
            log.warning("the key file %s can be read by group or others; chmod 600 it",
                        _show(config.api_key_file))
    tls: ssl.SSLContext | None = None
    if config.upstream.tls:
        try:
            tls = tls_context(config.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise StartFailed("inferproxy",
                f"ca_file {_show(config.ca_file) if config.ca_file else '-'} cannot be loaded:"
                f" {escape_line(str(exc))}"
            ) from exc
    elif not _is_loopback(config.upstream.host):
        log.warning("upstream %s is plain http on a network: prompts%s travel unencrypted;"
                    " use https", config.upstream, " and the key" if api_key else "")
    return ProxySettings(upstream=config.upstream, api_key=api_key, tls=tls,
                         max_request_bytes=config.max_request_bytes)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- the socket ----------------------------------------------------------------------


def bind_listener(path: Path) -> socket.socket:
    """Check `path` and its directory, bind a 0600 Unix socket there and listen."""
    try:
        return bind_unix_listener(path, shared_dir=False, open_socket=False,
                                  own_uid=os.getuid())
    except SocketSetupError as exc:
        raise StartFailed("inferproxy", str(exc)) from exc


def open_listener(config: InferproxyConfig) -> Listener:
    """The socket named ``infer`` from systemd, or the configured path bound here."""
    try:
        passed = _sd.listen_fds()
        activated = _sd.unix_listener(passed, SOCKET_NAME)
    except _sd.ActivationError as exc:
        raise StartFailed("inferproxy", str(exc)) from exc
    if passed and activated is None:
        names = ", ".join(sorted(passed))
        raise StartFailed(
            "inferproxy", f"systemd passed sockets named {escape_line(names)} but none named"
                          f" {SOCKET_NAME!r} (FileDescriptorName={SOCKET_NAME})")
    for name, group in passed.items():
        if name != SOCKET_NAME:
            for extra in group:
                extra.close()
    if activated is not None:
        return Listener(sock=activated, bound_path=None, activated=True)
    sock = bind_listener(config.socket)
    try:
        identity: tuple[int, int, int] | None = _identity(os.lstat(config.socket))
    except OSError:
        identity = None
    return Listener(sock=sock, bound_path=config.socket, activated=False,
                    bound_identity=identity)


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def remove_bound_socket(listener: Listener) -> None:
    """Remove the socket file inferproxy bound, if it is still the one it bound."""
    path = listener.bound_path
    if path is None or listener.bound_identity is None:
        return
    try:
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and _identity(st) == listener.bound_identity:
            os.unlink(path)
    except OSError:
        return


# -- serving -------------------------------------------------------------------------


async def _handle(stream: trio.SocketStream, settings: ProxySettings) -> None:
    try:
        await handle_connection(stream, settings)
    except Exception:  # a bug on one connection's path: logged whole, contained to it
        log.exception("infer.sock: a connection failed (contained; inferproxy goes on serving)")


async def serve(settings: ProxySettings, sock: socket.socket, *,
                task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Accept on `sock` (listening) for ever, one task per connection.

    Running out of descriptors or memory pauses accepting (backing off up to
    1 s); any other failure of the listener raises `ListenerLost`.
    """
    listener = trio.socket.from_stdlib_socket(sock)

    async def handle(conn: trio.socket.SocketType) -> None:
        await _handle(trio.SocketStream(conn), settings)

    async with trio.open_nursery() as nursery:
        task_status.started()
        await accept_loop(listener, handle, nursery, name="infer.sock")


async def run(config: InferproxyConfig) -> None:
    """The whole life of `inferproxy serve`; returns after SIGTERM or SIGINT."""
    settings = prepare(config)
    listener = open_listener(config)
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(serve, settings, listener.sock)
                where = ("the socket from systemd" if listener.activated
                         else _show(config.socket))
                log.info("listening on %s, forwarding to %s%s", where, config.upstream,
                         " with the API key" if settings.api_key else "")
                _sd.notify("READY=1")
                async for signum in signals:
                    log.info("%s: stopping", signal.Signals(signum).name)
                    break
                _sd.notify("STOPPING=1")
                nursery.cancel_scope.cancel()
    finally:
        remove_bound_socket(listener)
        listener.sock.close()
