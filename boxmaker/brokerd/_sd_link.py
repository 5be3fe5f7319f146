"""systemd socket activation and readiness, as brokerd needs them.

A private adapter: `boxmaker/_sd.py` is to hold the shared implementation;
until it does, this reads LISTEN_FDS/LISTEN_FDNAMES and writes NOTIFY_SOCKET
itself (sd_listen_fds(3), sd_notify(3)).
"""

from __future__ import annotations

import os
import socket

LISTEN_FDS_START = 3


def listen_fds(*, unset: bool = True) -> dict[str, int] | None:
    """Descriptors passed by systemd, by name; None when none were passed to us."""
    pid = os.environ.get("LISTEN_PID")
    count = os.environ.get("LISTEN_FDS")
    if count is None or pid is None or not pid.isdigit() or int(pid) != os.getpid():
        return None
    names_text = os.environ.get("LISTEN_FDNAMES", "")
    if unset:
        for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            os.environ.pop(key, None)
    if not count.isdigit() or int(count) < 1:
        return None
    names = names_text.split(":") if names_text else []
    out: dict[str, int] = {}
    for index in range(int(count)):
        fd = LISTEN_FDS_START + index
        os.set_inheritable(fd, False)
        name = names[index] if index < len(names) else "unknown"
        out.setdefault(name, fd)
    return out


def notify(state: str) -> bool:
    """Send `state` (e.g. ``READY=1``) to NOTIFY_SOCKET; False when there is none."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.connect(address)
            sock.sendall(state.encode("utf-8"))
        except OSError:
            return False
    return True
