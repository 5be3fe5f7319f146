"""systemd socket activation and readiness notification, for every daemon.

- `listen_fds()`: the sockets systemd passed (sd_listen_fds(3)): descriptors 3,
  4, ... counted by ``LISTEN_FDS``, meant for us only when ``LISTEN_PID`` is our
  pid, named by ``LISTEN_FDNAMES`` (colon-separated; ``unknown`` when a name
  is missing, as systemd itself says).  Returned as socket objects grouped by
  name, close-on-exec, and the three variables are removed from the
  environment so that children do not inherit them.
- `unix_listener(sockets, name)`: the one listening Unix stream socket of that
  name, or None; anything else under the name is refused (`ActivationError`).
  It calls listen() again, so that clients' SO_PEERCRED names this daemon and
  not systemd.
- `child_environment()`: this process's environment without the variables
  above and ``NOTIFY_SOCKET``, for the programs a daemon starts (podman): a
  child that sees ``LISTEN_FDS`` takes descriptors 3, 4, ... for sockets
  passed to it (podman then closes its own epoll descriptor and crashes), and
  one that sees ``NOTIFY_SOCKET`` tells systemd about itself.
- `notify(state)`: one datagram to ``NOTIFY_SOCKET`` (sd_notify(3)): a path, or
  an abstract name written ``@name``.  Returns False when there is no socket
  to tell or the datagram cannot be sent; readiness is advisory, never fatal.

No trio here: both are quick, synchronous system calls made at start and stop.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Final

from .._errors import ConfigurationError

LISTEN_FDS_START: Final = 3
NOTIFY_TIMEOUT_S: Final = 2.0
ACTIVATED_BACKLOG: Final = 128
_ENV_KEYS: Final = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")
_NOT_FOR_CHILDREN: Final = (*_ENV_KEYS, "NOTIFY_SOCKET")


class ActivationError(ConfigurationError):
    """The sockets systemd passed are not what the daemon needs (the setup's fault)."""


def listen_fds(*, unset_environment: bool = True) -> dict[str, list[socket.socket]]:
    """The sockets passed to this process by name; empty when none were passed.

    A ``LISTEN_PID`` naming another process (the variables were inherited)
    means none were passed to us.
    """
    env = os.environ
    pid_text = env.get("LISTEN_PID", "")
    count_text = env.get("LISTEN_FDS", "")
    names_text = env.get("LISTEN_FDNAMES", "")
    if unset_environment:
        for key in _ENV_KEYS:
            env.pop(key, None)
    if not (pid_text.isdigit() and int(pid_text) == os.getpid()):
        return {}
    if not count_text.isdigit() or int(count_text) < 1:
        return {}
    names = names_text.split(":") if names_text else []
    found: dict[str, list[socket.socket]] = {}
    for index in range(int(count_text)):
        fd = LISTEN_FDS_START + index
        try:
            os.set_inheritable(fd, False)
            sock = socket.socket(fileno=fd)
        except OSError as exc:
            raise ActivationError(
                f"descriptor {fd} (one of LISTEN_FDS={count_text}) is not a usable socket"
                f" ({exc.strerror or exc})"
            ) from exc
        name = names[index] if index < len(names) and names[index] else "unknown"
        found.setdefault(name, []).append(sock)
    return found


def _is_listening(sock: socket.socket) -> bool:
    try:
        return bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    except OSError:
        return False


def unix_listener(sockets: Mapping[str, list[socket.socket]], name: str) -> socket.socket | None:
    """The passed socket named `name`: exactly one listening Unix stream socket, or None."""
    group = sockets.get(name)
    if not group:
        return None
    if len(group) != 1:
        raise ActivationError(f"systemd passed {len(group)} sockets named {name!r}, not one")
    sock = group[0]
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        raise ActivationError(
            f"the socket named {name!r} from systemd is not a Unix stream socket"
            f" (family {sock.family.name}, type {sock.type.name})"
        )
    if not _is_listening(sock):
        raise ActivationError(f"the socket named {name!r} from systemd is not listening")
    # A client's SO_PEERCRED reports whoever last called listen() on the socket:
    # systemd (uid 0) until we do.  Listening again makes the kernel report this
    # daemon's own uid, which is what bxctl and loopd check the server against.
    try:
        sock.listen(ACTIVATED_BACKLOG)
    except OSError as exc:
        raise ActivationError(
            f"the socket named {name!r} from systemd cannot be listened on ({exc.strerror})"
        ) from exc
    return sock


def child_environment() -> dict[str, str]:
    """The environment for a child process: ours without socket activation and notify."""
    return {k: v for k, v in os.environ.items() if k not in _NOT_FOR_CHILDREN}


def notify_address(value: str) -> str | bytes | None:
    """The address to send to for a ``NOTIFY_SOCKET`` value; None for kinds not supported."""
    if value.startswith("@"):
        return b"\0" + os.fsencode(value[1:])
    if value.startswith("/"):
        return value
    return None


def notify(state: str) -> bool:
    """Send `state` (``READY=1``, ``STOPPING=1``, ``STATUS=...``) to ``NOTIFY_SOCKET``.

    True when the datagram was sent; False when there is no ``NOTIFY_SOCKET``,
    it is of a kind not supported here, or sending failed.
    """
    value = os.environ.get("NOTIFY_SOCKET", "")
    address = notify_address(value) if value else None
    if address is None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(NOTIFY_TIMEOUT_S)
        try:
            sock.sendto(state.encode("utf-8"), address)
        except OSError:
            return False
    return True
