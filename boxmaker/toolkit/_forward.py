"""`egress-forward`: the sidecar of an MCP server with egress (12 "Egress"), stdlib only.

``python3 -m boxmaker.toolkit egress-forward --listen 127.0.0.1:3128 --socket
/run/boxmaker-egress/socks`` listens on the sidecar's loopback (the server
container shares its network namespace, which has nothing but ``lo``) and
writes ``ready`` on stdout once it listens.  Each connection:

- reads one HTTP request head (at most 8 KiB, 10 s);
- ``CONNECT host:port``: opens a SOCKS5 CONNECT **by name** (address type 3,
  the name as the client wrote it) over the Unix socket to brokerd's egress
  proxy for this call, answers ``200 Connection established`` when brokerd
  connected and ``403`` when it refused, then relays both ways;
- anything else (absolute-form, any other method, a bad head) is ``403``.

There is no resolver here: every rule is brokerd's, this program is not
trusted.  One thread per connection (the sidecar's pids limit bounds them: a
connection that finds no thread is closed).  It ends when stdin closes.
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import threading
from typing import Final

HEAD_MAX: Final = 8192
HEAD_TIMEOUT_S: Final = 10.0
SOCKS_TIMEOUT_S: Final = 30.0
_FORBIDDEN = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


def _read_head(client: socket.socket) -> tuple[bytes, bytes] | None:
    """The request head and what came after it, or None."""
    client.settimeout(HEAD_TIMEOUT_S)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_MAX:
            return None
        chunk = client.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def connect_target(head: bytes) -> tuple[bytes, int] | None:
    """(name, port) of a ``CONNECT name:port HTTP/1.x`` head, or None."""
    line = head.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) != 3 or parts[0] != b"CONNECT" or not parts[2].startswith(b"HTTP/1."):
        return None
    name, colon, port = parts[1].rpartition(b":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if name.startswith(b"[") and name.endswith(b"]"):
        name = name[1:-1]
    if not 0 < len(name) <= 255:
        return None
    return name, int(port)


def _exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the egress proxy closed the connection")
        data += chunk
    return data


def socks_connect(path: str, name: bytes, port: int) -> socket.socket | None:
    """A SOCKS5 CONNECT by name through brokerd's socket: the stream, or None if refused."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.settimeout(SOCKS_TIMEOUT_S)
    try:
        upstream.connect(path)
        upstream.sendall(b"\x05\x01\x00")
        if _exact(upstream, 2) != b"\x05\x00":
            upstream.close()
            return None
        upstream.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name
                         + port.to_bytes(2, "big"))
        reply = _exact(upstream, 10)
    except OSError:
        upstream.close()
        raise
    if reply[1] != 0:
        upstream.close()
        return None
    upstream.settimeout(None)
    return upstream


def relay(a: socket.socket, b: socket.socket) -> None:
    """Both ways until both sides have ended (a half-close is passed on)."""
    a.settimeout(None)
    b.settimeout(None)
    open_in = {a: True, b: True}
    other = {a: b, b: a}
    while any(open_in.values()):
        readable, _, _ = select.select([s for s, o in open_in.items() if o], [], [])
        for sock in readable:
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if chunk:
                try:
                    other[sock].sendall(chunk)
                    continue
                except OSError:
                    return
            open_in[sock] = False
            with contextlib.suppress(OSError):
                other[sock].shutdown(socket.SHUT_WR)


def handle(client: socket.socket, path: str) -> None:
    with client:
        try:
            got = _read_head(client)
            target = None if got is None else connect_target(got[0])
            if got is None or target is None:
                client.sendall(_FORBIDDEN)
                return
            try:
                upstream = socks_connect(path, *target)
            except OSError:
                client.sendall(_BAD_GATEWAY)
                return
            if upstream is None:
                client.sendall(_FORBIDDEN)
                return
            with upstream:
                client.sendall(_ESTABLISHED)
                if got[1]:
                    upstream.sendall(got[1])
                relay(client, upstream)
        except OSError:
            return


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        try:
            threading.Thread(target=handle, args=(client, path), daemon=True).start()
        except RuntimeError:  # no thread left (the pids limit): this one is closed
            client.close()


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "--listen" or argv[2] != "--socket":
        sys.stderr.write("usage: python3 -m boxmaker.toolkit egress-forward "
                         "--listen HOST:PORT --socket PATH\n")
        return 2
    host, _, port = argv[1].rpartition(":")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, argv[3]), daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # Until stdin closes (brokerd ends the call), then everything goes with the process.
    while sys.stdin.buffer.read(65536):
        pass
    return 0
