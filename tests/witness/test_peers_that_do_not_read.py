"""The witness drops peers that do not read, and survives running out of
descriptors (issue 22 item 10).  The witness served in-process over real
loopback TCP, under trio's autojump clock (the deadlines are virtual time).

- Forty connections that each pipeline 999 `GET /latest/<origin>` and never
  read their answers are closed by the witness once an answer cannot be
  written within `WRITE_TIMEOUT_S`, and it goes on answering others.
- A connection that keeps sending requests slowly, one within each idle
  deadline, is closed at `CONNECTION_TIMEOUT_S`.
- Past `MAX_CONNECTIONS`, accepting pauses until one ends.
- Out of descriptors (EMFILE), accepting pauses with one log line per
  `PAUSE_LOG_INTERVAL_S`, no traceback; once descriptors are free, it serves.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
import trio
import trio.testing

from boxmaker._http import _http11
from boxmaker._http._http11 import request
from boxmaker.proto._grammar import Url, parse_endpoint_url
from boxmaker.witness._serve import serve
from tests.fakes.tlog import ORIGIN, TestLog
from tests.witness.test_serve import LOG_KEY, WITNESS, config

PEERS = 40
PIPELINED = 999
_ESTABLISHED = 1
GET = f"GET /latest/{quote(ORIGIN, safe='')} HTTP/1.1\r\nhost: w\r\n\r\n".encode()


def _tcp_state(sock: trio.socket.SocketType) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


@pytest.fixture
async def witness(tmp_path: Path) -> AsyncIterator[Url]:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(serve, config(tmp_path), WITNESS)
        url = parse_endpoint_url(f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}")
        log = TestLog(LOG_KEY)
        log.append(6)
        assert (await request(url, "POST", "/add-checkpoint", log.add_body(0))).status == 200
        yield url
        nursery.cancel_scope.cancel()


async def _peer(url: Url, data: bytes = b"") -> trio.socket.SocketType:
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # reads nothing anyway
    await sock.connect((url.host, url.effective_port))
    view = memoryview(data)
    while view:
        view = view[await sock.send(view):]
    return sock


async def _latest_within_a_second(url: Url) -> None:
    with trio.fail_after(1.0):
        answer = await request(url, "GET", f"/latest/{quote(ORIGIN, safe='')}")
    assert answer.status == 200


async def test_pipelining_peers_that_never_read_are_dropped(
        witness: Url, autojump_clock: trio.testing.MockClock) -> None:
    peers = [await _peer(witness, GET * PIPELINED) for _ in range(PEERS)]
    try:
        await _latest_within_a_second(witness)  # others are answered meanwhile
        await trio.sleep(_http11.WRITE_TIMEOUT_S + 1)
        assert [_tcp_state(p) for p in peers].count(_ESTABLISHED) == 0
        await _latest_within_a_second(witness)
    finally:
        for sock in peers:
            sock.close()


async def _one_exchange(sock: trio.socket.SocketType) -> bool:
    """One GET and its answer's head; False when the witness has closed the connection.

    (An answer's body may come with the next head: only the heads are counted.)"""
    try:
        await sock.send(GET)
        head = b""
        while b"HTTP/1.1 200" not in head or b"\r\n\r\n" not in head:
            data = await sock.recv(65536)
            if not data:
                return False
            head += data
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


async def test_a_slow_steady_peer_is_closed_at_the_connection_deadline(
        witness: Url, autojump_clock: trio.testing.MockClock) -> None:
    sock = await _peer(witness)
    started = trio.current_time()
    exchanges = 0
    try:
        with trio.fail_after(_http11.CONNECTION_TIMEOUT_S + 60):
            while await _one_exchange(sock):
                exchanges += 1
                await trio.sleep(_http11.IDLE_TIMEOUT_S - 2)  # always just within idle
        elapsed = trio.current_time() - started
        assert exchanges > 1
        # Closed at the deadline, seen at the next send.
        assert abs(elapsed - _http11.CONNECTION_TIMEOUT_S) <= _http11.IDLE_TIMEOUT_S
    finally:
        sock.close()


async def test_accepting_pauses_at_max_connections(
        witness: Url, autojump_clock: trio.testing.MockClock) -> None:
    peers = [await _peer(witness) for _ in range(_http11.MAX_CONNECTIONS)]
    try:
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.TooSlowError):
            await _latest_within_a_second(witness)  # in the backlog, not read
        peers.pop().close()
        await _latest_within_a_second(witness)
    finally:
        for sock in peers:
            sock.close()


def _lowest_free_fd() -> int:
    used = {int(name) for name in os.listdir("/proc/self/fd")}
    fd = 0
    while fd in used:
        fd += 1
    return fd


async def test_out_of_descriptors_pauses_with_one_line_per_interval(
        witness: Url, autojump_clock: trio.testing.MockClock,
        caplog: pytest.LogCaptureFixture) -> None:
    peer = trio.socket.socket()  # its descriptor before the limit; connected after it
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    caplog.set_level(logging.WARNING, logger="boxmaker.http")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (_lowest_free_fd(), hard))
        await peer.connect((witness.host, witness.effective_port))  # the witness cannot accept it
        await peer.send(GET)
        await trio.sleep(3 * _http11.PAUSE_LOG_INTERVAL_S - 1)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        records = [r for r in caplog.records if r.name == "boxmaker.http"]
        assert 1 <= len(records) <= 3, [r.getMessage() for r in records]
        assert all(r.exc_info is None for r in records)
        assert "accepting paused" in records[0].getMessage()
        with trio.fail_after(5):
            data = await peer.recv(65536)
        assert data.startswith(b"HTTP/1.1 200")
    finally:
        peer.close()
