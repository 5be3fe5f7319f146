"""Issue 22 item 1: no request can end the approval page.

The real page process (`python -m boxmaker.approvals serve`) in front of a
real brokerd, attacked over the network with no login.  Under hypercorn one
HTTP/2 POST whose body followed the 403 ended the process (hypercorn's
`KeyError` in `protocol/h2.py`, upstream issue 329): over cleartext with
HTTP/2's prior knowledge, over `Upgrade: h2c`, and over TLS with ALPN `h2`
(how a browser's `fetch` reaches it).  The `h2` package is the attacking
client.  Each test then checks that the page still answers.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import pytest
from hyperframe.frame import DataFrame

from tests.approvals.browser import ECHO_ASK, PageProcess, free_port
from tests.fakes.brokerd import BrokerdProcess, Home, start


class Served:
    def __init__(self, *, tls: bool) -> None:
        self.port = free_port()
        self.origin = f"{'https' if tls else 'http'}://localhost:{self.port}"
        self.home = Home(grants={"ask.toml": ECHO_ASK}, approvals_extra=(
            f'rp_id = "localhost"\norigins = ["{self.origin}"]\nrequire_passkey = true\n'))
        self.brokerd: BrokerdProcess = start(self.home)
        self.page = PageProcess(self.home, self.origin, self.port)
        self.tls = tls

    @property
    def ca(self) -> Path:
        return self.home.home / "approvals" / "ca.pem"

    def close(self) -> None:
        self.page.stop()
        self.brokerd.kill()
        self.home.cleanup()

    def connect(self, alpn: list[str] | None = None) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=20)
        if not self.tls:
            return sock
        context = ssl.create_default_context(cafile=str(self.ca))
        if alpn is not None:
            context.set_alpn_protocols(alpn)
        return context.wrap_socket(sock, server_hostname="localhost")

    def alive(self) -> int:
        """The page's status for GET / (after giving a dying process time to die)."""
        with contextlib.suppress(subprocess.TimeoutExpired):  # a dying process takes real time
            self.page.proc.wait(timeout=1)
        assert self.page.proc.poll() is None, "the page exited: " + self.output()
        with self.connect() as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % self.port)
            answer = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
            answer.begin()
            answer.read()
            return answer.status

    def output(self) -> str:
        if self.page.proc.poll() is not None and self.page.proc.stdout is not None:
            return "".join(self.page.lines) + self.page.proc.stdout.read()
        return "".join(self.page.lines)


@pytest.fixture
def plain() -> Iterator[Served]:
    made = Served(tls=False)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def tls() -> Iterator[Served]:
    made = Served(tls=True)
    try:
        yield made
    finally:
        made.close()


def _receive(sock: socket.socket, conn: h2.connection.H2Connection) -> list[h2.events.Event]:
    try:
        data = sock.recv(65536)
    except (ConnectionError, TimeoutError, ssl.SSLError):
        data = b""
    if not data:
        return [h2.events.ConnectionTerminated()]
    try:
        return list(conn.receive_data(data))
    except h2.exceptions.ProtocolError:
        return [h2.events.ConnectionTerminated()]  # not HTTP/2 (an HTTP/1.1 400)


def _headers_then_body(sock: socket.socket, served: Served, *, upgrade: bool = False) -> str:
    """The attack: a POST's headers, read the answer, then its body.  What it got."""
    try:
        return _attack(sock, served, upgrade=upgrade)
    except OSError:  # the server ended the connection (an HTTP/1.1 answer, then close)
        return "not HTTP/2"


def _attack(sock: socket.socket, served: Served, *, upgrade: bool) -> str:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    headers = [(":method", "POST"), (":scheme", "https" if served.tls else "http"),
               (":authority", f"localhost:{served.port}"), (":path", "/api/refuse"),
               ("content-type", "application/json")]
    if upgrade:
        settings = conn.initiate_upgrade_connection()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost:%d\r\nConnection: Upgrade, "
                     b"HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: %s\r\n\r\n"
                     % (served.port, settings))
        answer = sock.recv(65536)
        if not answer.startswith(b"HTTP/1.1 101"):
            return "no upgrade: " + answer.split(b"\r\n", 1)[0].decode("latin-1")
        rest = answer.split(b"\r\n\r\n", 1)[1]
        sock.sendall(conn.data_to_send())  # the client's preface (stream 1 is the GET)
        if rest:
            conn.receive_data(rest)
        stream = 3
    else:
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        stream = 1
    conn.send_headers(stream, headers, end_stream=False)
    sock.sendall(conn.data_to_send())
    status = ""
    while not status:
        for event in _receive(sock, conn):
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                status = dict(event.headers)[b":status"].decode()
            elif isinstance(event, h2.events.ConnectionTerminated):
                return "not HTTP/2"
        sock.sendall(conn.data_to_send())
    # The body as a raw frame: the client's own state machine (which saw the answer,
    # and perhaps a reset) must not stop an attacker from sending it.
    with contextlib.suppress(OSError):
        for _ in range(9):
            sock.sendall(DataFrame(stream, data=b"x" * 1000).serialize())
        sock.sendall(DataFrame(stream, data=b"x" * 1000, flags=["END_STREAM"]).serialize())
    for _ in range(3):
        if any(isinstance(e, h2.events.ConnectionTerminated) for e in _receive(sock, conn)):
            break
    return status


def test_http2_prior_knowledge_cannot_end_the_page(plain: Served) -> None:
    with plain.connect() as sock:
        got = _headers_then_body(sock, plain)
    assert plain.alive() == 200
    assert got == "not HTTP/2"  # the page speaks HTTP/1.1 only


def test_http2_over_an_h2c_upgrade_cannot_end_the_page(plain: Served) -> None:
    with plain.connect() as sock:
        got = _headers_then_body(sock, plain, upgrade=True)
    assert plain.alive() == 200
    assert got.startswith("no upgrade"), got


def test_http2_over_tls_cannot_end_the_page(tls: Served) -> None:
    with tls.connect(alpn=["h2", "http/1.1"]) as sock:
        assert isinstance(sock, ssl.SSLSocket)
        alpn = sock.selected_alpn_protocol()
        got = _headers_then_body(sock, tls)
    assert tls.alive() == 200
    assert alpn in (None, "http/1.1") and got == "not HTTP/2"


def test_http2_over_tls_with_only_h2_offered_cannot_end_the_page(tls: Served) -> None:
    try:
        with tls.connect(alpn=["h2"]) as sock:
            _headers_then_body(sock, tls)
    except (ssl.SSLError, ConnectionError):
        pass  # no common protocol: the handshake fails, in that connection only
    assert tls.alive() == 200
