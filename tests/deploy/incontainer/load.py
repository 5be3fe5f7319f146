"""Tool calls on broker.sock from several threads until a stop file appears.

Run inside the container as loopd's uid (setpriv).  Every call has its own
path, so the audit log can be searched for it; one JSON line per call on
stdout: ``{"path", "answer"}`` where answer is the final frame's kind
(result, denied, error) or null when the connection broke without one (not
acknowledged: the client may retry).  Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time

SOCKET = "/run/boxmaker/broker.sock"
STOP = "/tmp/bxsd-load-stop"
LOCK = threading.Lock()


def frames(sock: socket.socket):  # type: ignore[no-untyped-def]
    buf = b""
    while True:
        while len(buf) >= 4:
            (length,) = struct.unpack(">I", buf[:4])
            if len(buf) < 4 + length:
                break
            yield json.loads(buf[4:4 + length])
            buf = buf[4 + length:]
        data = sock.recv(65536)
        if not data:
            return
        buf += data


def one_call(path: str, request_id: int) -> str | None:
    body = json.dumps({"v": 1, "id": request_id, "call": {
        "session": "load", "tool": "read_file", "args": {"path": path}}}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(60)
            sock.connect(SOCKET)
            sock.sendall(struct.pack(">I", len(body)) + body)
            last = None
            for frame in frames(sock):
                last = frame
    except OSError:
        return None
    if last is None:
        return None
    return next(k for k in last if k not in ("id", "v"))


def worker(prefix: str) -> None:
    number = 0
    while not os.path.exists(STOP):
        number += 1
        path = f"{prefix}-{number}"
        answer = one_call(path, number)
        with LOCK:
            print(json.dumps({"path": path, "answer": answer}), flush=True)
        if answer is None:
            time.sleep(0.05)  # brokerd is restarting: do not spin


def main() -> None:
    prefixes = sys.argv[1:]
    threads = [threading.Thread(target=worker, args=(p,)) for p in prefixes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
