"""Run as an ExecStartPost= of boxmaker-loopd.service (a test-only drop-in), so with
exactly loopd's sandbox: its uid, namespaces, address families and system call
filter.  Prints one line, ``BXSD-PROBE {json}``, with what loopd can and cannot do.
Standard library only (it runs with the installed venv's python).
"""

from __future__ import annotations

import json
import os
import socket


def attempt(action) -> str:  # type: ignore[no-untyped-def]
    try:
        action()
    except OSError as exc:
        return f"{type(exc).__name__}:{exc.errno}"
    return "ok"


def connect_unix(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)


def connect_tcp(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=5):
        pass


def read_dir(path: str) -> None:
    os.listdir(path)


def main() -> None:
    report = {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "groups": sorted(os.getgroups()),
        "admin_sock": attempt(lambda: connect_unix("/run/boxmaker/admin.sock")),
        "loop_sock": attempt(lambda: connect_unix("/run/boxmaker/loop.sock")),
        "broker_sock": attempt(lambda: connect_unix("/run/boxmaker/broker.sock")),
        "infer_sock": attempt(lambda: connect_unix("/run/boxmaker/infer.sock")),
        "brokerd_home": attempt(lambda: read_dir("/var/lib/boxmaker")),
        "brokerd_grants": attempt(lambda: read_dir("/var/lib/boxmaker/grants")),
        "owner_home": attempt(lambda: read_dir("/home/alice")),
        "write_etc": attempt(lambda: open("/etc/boxmaker/planted", "w").close()),
        "own_home": attempt(lambda: read_dir("/var/lib/boxmaker-loopd")),
        "inet_socket": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
        "netlink_socket": attempt(lambda: socket.socket(
            socket.AF_NETLINK, socket.SOCK_RAW, 0).close()),
        "llama_tcp": attempt(lambda: connect_tcp("127.0.0.1", 8080)),
    }
    print("BXSD-PROBE " + json.dumps(report, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
