"""http_fetch: HTTP/1.1 (h11) with TLS over the per-call SOCKS5 egress socket.

The container has no network; its only way out is the SOCKS5 server brokerd
runs on a Unix socket for this call (08-runner).  The toolkit asks it to
CONNECT to the URL's host and port by name; brokerd has already resolved and
vetted the name and connects to the pinned address.  Redirects are not
followed: a 3xx comes back with its Location.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import h11

from ._answer import Encoding, fit_content, ok
from ._errors import ToolError

# Only these response headers are returned (08-runner).
KEPT_HEADERS = ("content-type", "content-length", "location", "last-modified", "etag")
# Past the cap, the rest of a body is read (and dropped) up to this many bytes
# to report its size; a longer body is reported by Content-Length, or as at
# least what was read.
_COUNT_LIMIT = 16 * 1024 * 1024
_USER_AGENT = b"boxmaker-toolkit/1"
_IO_TIMEOUT_S = 120.0


def parse_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, target) of a URL already of the policy's grammar."""
    if url.startswith("https://"):
        scheme, default = "https", 443
    elif url.startswith("http://"):
        scheme, default = "http", 80
    else:
        raise ToolError("bad_request", "the URL must start with https:// or http://")
    prefix = scheme + "://"
    rest = url[len(prefix) :]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, target = rest[:cut], rest[cut:]
    if not target.startswith("/"):
        target = "/" + target
    host, sep, port_text = authority.partition(":")
    port = default
    if sep:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ToolError("bad_request", "the URL's port is not valid")
        port = int(port_text)
    if not host or any(c in host for c in "@[]#") or not host.isascii():
        raise ToolError("bad_request", "the URL's host is not valid")
    return scheme, host, port, target


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ToolError("egress_refused", "the egress proxy closed the connection")
        buf += chunk
    return buf


_SOCKS_REPLIES = {
    1: "general failure",
    2: "connection not allowed",
    3: "network unreachable",
    4: "host unreachable",
    5: "connection refused",
    6: "TTL expired",
    7: "command not supported",
    8: "address type not supported",
}


def socks_connect(socket_path: str, host: str, port: int) -> socket.socket:
    """A stream to host:port through the SOCKS5 server on `socket_path`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_IO_TIMEOUT_S)
        try:
            sock.connect(socket_path)
        except OSError as exc:
            raise ToolError("egress_unavailable", "cannot reach the egress proxy") from exc
        sock.sendall(b"\x05\x01\x00")
        if _recv_exact(sock, 2) != b"\x05\x00":
            raise ToolError("egress_refused", "the egress proxy refused the greeting")
        name = host.encode("ascii")
        sock.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + port.to_bytes(2, "big"))
        version, reply, _, atyp = _recv_exact(sock, 4)
        if version != 5 or reply != 0:
            why = _SOCKS_REPLIES.get(reply, f"reply {reply}")
            raise ToolError("egress_refused", f"the egress proxy refused: {why}")
        if atyp == 1:
            _recv_exact(sock, 4 + 2)
        elif atyp == 4:
            _recv_exact(sock, 16 + 2)
        elif atyp == 3:
            _recv_exact(sock, _recv_exact(sock, 1)[0] + 2)
        else:
            raise ToolError("egress_refused", "the egress proxy sent a bad reply")
    except BaseException:
        sock.close()
        raise
    return sock


def _tls(sock: socket.socket, host: str) -> ssl.SSLSocket:
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        raise ToolError("tls_failed", f"certificate not accepted: {exc.verify_message}") from exc
    except (ssl.SSLError, OSError) as exc:
        raise ToolError("tls_failed", f"TLS handshake failed: {exc}") from exc


def http_fetch(args: dict[str, Any], cap: int, egress_socket: str | None) -> bytes:
    url = args.get("url")
    method = args.get("method", "GET")
    if not isinstance(url, str):
        raise ToolError("bad_request", "argument 'url' must be a string")
    if method not in ("GET", "HEAD"):
        raise ToolError("bad_request", "method must be GET or HEAD")
    if set(args) - {"url", "method"}:
        raise ToolError("bad_request", "unknown arguments")
    if egress_socket is None:
        raise ToolError("egress_unavailable", "no egress socket was given")
    scheme, host, port, target = parse_url(url)
    raw = socks_connect(egress_socket, host, port)
    stream: socket.socket = _tls(raw, host) if scheme == "https" else raw
    try:
        request = _request(method, host, port, scheme, target)
        status, headers, body, complete, size = _exchange(stream, request, method, cap)
    finally:
        stream.close()

    def build(content: str, encoding: Encoding, truncated: bool) -> dict[str, Any]:
        return ok(
            {
                "status": status,
                "headers": headers,
                "body": content,
                "encoding": encoding,
                "bytes": size,
                "truncated": truncated,
            }
        )

    return fit_content(body, complete=complete, cap=cap, build=build)


def _host_header(host: str, port: int, scheme: str) -> bytes:
    default = 443 if scheme == "https" else 80
    return (host if port == default else f"{host}:{port}").encode("ascii")


def _request(method: str, host: str, port: int, scheme: str, target: str) -> h11.Request:
    return h11.Request(
        method=method,
        target=target.encode("ascii"),
        headers=[
            (b"host", _host_header(host, port, scheme)),
            (b"user-agent", _USER_AGENT),
            (b"accept-encoding", b"identity"),
            (b"connection", b"close"),
        ],
    )


def _exchange(
    stream: socket.socket, request: h11.Request, method: str, cap: int
) -> tuple[int, dict[str, str], bytes, bool, int]:
    conn = h11.Connection(our_role=h11.CLIENT)
    try:
        stream.sendall(conn.send(request) + conn.send(h11.EndOfMessage()))
        response: h11.Response | None = None
        body = bytearray()
        seen = 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if seen > cap + _COUNT_LIMIT:
                    break
                conn.receive_data(stream.recv(65536))
                continue
            if isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                seen += len(event.data)
                room = cap + 1 - len(body)
                if room > 0:
                    body += event.data[:room]
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
    except h11.RemoteProtocolError as exc:
        raise ToolError("fetch_failed", f"the server broke HTTP/1.1: {exc}") from exc
    except ssl.SSLError as exc:
        raise ToolError("fetch_failed", f"TLS failed: {exc}") from exc
    except TimeoutError as exc:
        raise ToolError("fetch_failed", "the server did not answer in time") from exc
    except OSError as exc:
        raise ToolError("fetch_failed", f"the connection failed: {exc}") from exc
    if response is None:
        raise ToolError("fetch_failed", "the server closed without a response")
    headers = _kept_headers(response.headers)
    size = seen
    declared = headers.get("content-length", "")
    if declared.isdigit() and method == "GET":
        size = max(size, int(declared))
    complete = len(body) <= cap and seen == len(body)
    return response.status_code, headers, bytes(body[:cap]), complete, size


def _kept_headers(raw: Any) -> dict[str, str]:
    kept: dict[str, str] = {}
    for name, value in raw:
        key = bytes(name).decode("ascii", "replace").lower()
        if key in KEPT_HEADERS:
            text = bytes(value).decode("latin-1")
            kept[key] = f"{kept[key]}, {text}" if key in kept else text
    return kept
