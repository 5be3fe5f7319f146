"""Unix sockets for every daemon (05-brokerd "Serving"): binding safely, peer checks, accepting.

brokerd, loopd and inferproxy bind the same way.  Binding refuses
(SocketSetupError; each daemon adds its own start-failed pointer) when the
socket would sit directly in `/`, when any existing component of its path is
a symbolic link, when an existing socket directory is not owned by the
daemon's uid or is writable by group or others, or when the path holds
something that is not a stale socket.  A missing directory is created with
mode 0700 (only the daemon's own uid may connect) or 0711; socket files are
0600 or 0666 (then SO_PEERCRED is the gate).

Clients check the server with `served_by`: the uid they expect, or the
service manager itself (pid 1, root) for a socket that systemd made and has
not yet handed over (the connection that starts the daemon).

The accept loop (trio) is `boxmaker._sockets._unix_accept`: this module loads no trio,
so that a client (`bxctl status`) does not pay for it.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Protocol

import attrs

from .._errors import UnavailableError


class _Socket(Protocol):
    """A socket of the standard library or of trio: what SO_PEERCRED needs."""

    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


LISTEN_BACKLOG = 128
_UCRED = struct.Struct("3i")


class SocketSetupError(UnavailableError):
    """A socket path that a daemon refuses to bind (the environment's fault)."""


class ListenerLost(UnavailableError):
    """A listener failed in a way that is not resource exhaustion."""

    runbook = "docs/runbook.md#brokerd-listener-lost"
    runbook_shown_by: ClassVar[Mapping[str, str]] = {
        "inferproxy": "docs/runbook.md#inferproxy-listener-lost"}


@attrs.frozen
class PeerCred:
    pid: int
    uid: int
    gid: int


def peer_credentials(sock: _Socket) -> PeerCred:
    """The kernel's word on who is at the other end (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCred(pid=pid, uid=uid, gid=gid)


SERVICE_MANAGER_PID = 1


def served_by(cred: PeerCred, uid: int) -> bool:
    """Whether a server's credentials (`peer_credentials` on the client side) are `uid`'s.

    The kernel gives a client the credentials of whoever last called listen() on
    the socket.  For a socket systemd made, that is pid 1 as root until the
    daemon it starts listens again (`boxmaker._sockets._sd.unix_listener`), so the very
    connection that starts the daemon sees pid 1: accepted, since the service
    manager hands that connection only to the daemon its unit names, and root
    could impersonate any uid anyway.  Any other root process is not.
    """
    return cred.uid == uid or (cred.uid == 0 and cred.pid == SERVICE_MANAGER_PID)


def _show(path: Path | str) -> str:
    return repr(os.fsdecode(path))


def check_path_components(path: Path) -> None:
    """Refuse a symbolic link in any existing component of `path` (itself included)."""
    current = Path("/")
    for part in path.parts[1:]:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise SocketSetupError(f"{_show(current)} cannot be examined ({exc.strerror})") from exc
        if stat.S_ISLNK(st.st_mode):
            raise SocketSetupError(
                f"{_show(current)} is a symbolic link; socket paths may not pass through one"
            )


def prepare_socket_dir(directory: Path, *, shared: bool, own_uid: int) -> None:
    """Create the socket directory, or check an existing one."""
    wanted = 0o711 if shared else 0o700
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise SocketSetupError(f"{_show(directory)} cannot be examined ({exc.strerror})") from exc
    if st is None:
        try:
            os.makedirs(directory.parent, mode=0o700, exist_ok=True)
            os.mkdir(directory, wanted)
            os.chmod(directory, wanted)
        except OSError as exc:
            raise SocketSetupError(
                f"the socket directory {_show(directory)} cannot be created ({exc.strerror})"
            ) from exc
        check_path_components(directory)
        return
    if not stat.S_ISDIR(st.st_mode):
        raise SocketSetupError(f"{_show(directory)} is not a directory")
    if st.st_uid != own_uid:
        raise SocketSetupError(
            f"the socket directory {_show(directory)} belongs to uid {st.st_uid}, "
            f"not to this daemon's uid {own_uid}"
        )
    if st.st_mode & 0o022:
        raise SocketSetupError(
            f"the socket directory {_show(directory)} is writable by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o})"
        )
    if shared and st.st_mode & 0o011 != 0o011:
        try:
            os.chmod(directory, stat.S_IMODE(st.st_mode) | 0o011)
        except OSError as exc:
            raise SocketSetupError(
                f"the socket directory {_show(directory)} cannot be opened to the allowed uids "
                f"({exc.strerror})"
            ) from exc


def _is_stale_socket(path: Path) -> bool:
    """True when nothing listens on the socket at `path` (connect is refused)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(os.fsencode(path))
    except ConnectionRefusedError:
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def clear_socket_path(path: Path) -> None:
    """Remove a stale socket at `path`; refuse anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SocketSetupError(f"{_show(path)} cannot be examined ({exc.strerror})") from exc
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketSetupError(
            f"{_show(path)} exists and is not a socket; it will not be replaced"
        )
    if not _is_stale_socket(path):
        raise SocketSetupError(f"something is already listening on {_show(path)}")
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SocketSetupError(
            f"the stale socket {_show(path)} cannot be removed ({exc.strerror})"
        ) from exc


def bind_unix_listener(path: Path, *, shared_dir: bool, open_socket: bool,
                       own_uid: int) -> socket.socket:
    """Check `path`, create or check its directory, bind and listen.

    `shared_dir`: some uid other than the daemon's may connect to a socket in this
    directory (0711 instead of 0700).  `open_socket`: some other uid may
    connect to this socket (0666 instead of 0600; SO_PEERCRED is then the gate).
    """
    path = Path(os.path.abspath(path))
    if path.parent == Path("/"):
        raise SocketSetupError(f"{_show(path)} would sit directly in /")
    if len(os.fsencode(path)) >= 108:
        raise SocketSetupError(f"{_show(path)} is too long for a Unix socket (107 bytes at most)")
    check_path_components(path)
    prepare_socket_dir(path.parent, shared=shared_dir, own_uid=own_uid)
    clear_socket_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        old_umask = os.umask(0o177)
        try:
            sock.bind(os.fsencode(path))
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o666 if open_socket else 0o600)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise SocketSetupError(f"{_show(path)} cannot be bound ({exc.strerror})") from exc
    return sock
