"""Bad input on both of brokerd's sockets: random bytes and random JSON frames.

Whatever arrives, the real brokerd answers with at most one frame per message
it could read (an error, a denial, a pending or a result), never crashes, and
still serves an ordinary call afterwards (09-operations "Bad input").
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.brokerd import BrokerdProcess, Home, connect, echo, read_frames, start

ANSWER_KEYS = {"error", "denied", "pending", "result", "approvals", "approval", "ok", "status",
               "grants_report", "session"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(["v", "id", "call", "session", "tool", "args", "approve", "refuse",
                        "approval_id", "status", "declassify", "label", "untrusted", "reason",
                        "approvals", "grants_check", "x"])
near_requests = st.fixed_dictionaries({
    "v": st.sampled_from([1, 1, 1, 2, "1", None]),
    "id": st.one_of(st.integers(min_value=-1, max_value=2**64), st.none(), st.text(max_size=3)),
}).flatmap(lambda base: st.dictionaries(keys, json_values, max_size=3).map(
    lambda extra: {**base, **extra}))


@pytest.fixture(scope="module")
def daemon() -> Iterator[tuple[Home, BrokerdProcess]]:
    home = Home(ttl_ms=50)
    proc = start(home)
    yield home, proc
    assert proc.stop() == 0
    home.cleanup()


def exchange(path: Path, data: bytes) -> list[dict[str, Any]]:
    with connect(path, timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(1)  # no more from us: brokerd answers or sees the end
        return list(read_frames(sock))


def check(frames: list[dict[str, Any]]) -> None:
    assert len(frames) <= 2, frames  # pending then a final answer, at most
    for frame in frames:
        assert set(frame) - {"id"} <= ANSWER_KEYS and len(frame) == 2, frame
        if "error" in frame:
            assert frame["error"]["message"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=64))
def test_random_bytes(daemon: tuple[Home, BrokerdProcess], data: bytes) -> None:
    home, proc = daemon
    for path in (home.broker, home.admin):
        check(exchange(path, data))
    assert proc.proc.poll() is None


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=near_requests)
def test_random_requests(daemon: tuple[Home, BrokerdProcess], document: dict[str, Any]) -> None:
    home, proc = daemon
    body = json.dumps(document).encode()
    for path in (home.broker, home.admin):
        check(exchange(path, struct.pack(">I", len(body)) + body))
    assert proc.proc.poll() is None
    assert echo(home.broker)[0]["result"]["status"] == "ok"
