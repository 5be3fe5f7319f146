"""The h11/trio connection against the fake llama-server and raw servers.

`fetch` is in tests/http/test_fetch.py, `Endpoint` in tests/http/test_endpoint.py.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._http import (
    Endpoint,
    InferenceTimeout,
    InferenceUnavailable,
    Timeouts,
)
from boxmaker._http.client import HttpConnection
from tests.fakes.sse_client import BODY, bare_and_pointed, collect


async def test_connection_refused(tmp_path: Path) -> None:
    with trio.fail_after(30), pytest.raises(InferenceUnavailable) as info:
        await collect(Endpoint.unix(tmp_path / "missing.sock"))
    assert "cannot connect" in info.value.message and bare_and_pointed(info.value)


async def test_connect_timeout_fires_on_time(autojump_clock: Any) -> None:
    # a listener that never accepts, with its backlog full: the next connect hangs
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    port = listener.getsockname()[1]
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        start = trio.current_time()
        with trio.fail_after(5000), pytest.raises(InferenceTimeout) as info:
            await collect(Endpoint.tcp("127.0.0.1", port), Timeouts(connect_s=10))
        assert info.value.phase == "connect"
        assert trio.current_time() - start == pytest.approx(10)
    finally:
        for s in [*fillers, listener]:
            s.close()


async def test_fake_counts_a_half_close(serve: Any) -> None:
    # the control for "never a half-close": a client that does one is seen
    fake, endpoint = await serve({"turns": [{"steps": [{"sleep_s": 0.05}, {"text": "a"}]}]})
    with trio.fail_after(30):
        conn = await HttpConnection.open(endpoint)
        async with conn:
            await conn.send_request("POST", "/v1/chat/completions", body=BODY)
            await conn._stream.send_eof()  # type: ignore[attr-defined]
            while fake.stream_aborts == 0:
                await trio.sleep(0.01)
