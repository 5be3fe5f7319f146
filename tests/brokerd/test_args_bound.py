"""The arguments a call may carry are bounded (issue 11 item 3, `[policy]
max_args_bytes`): brokerd served in-process over real sockets, the real audit log.

A call whose canonical arguments are longer is denied `bad_args`, and its `call`
record holds `{}` and `omitted: {bytes, sha256}` instead, so that no call can
make the fsynced log grow by more than a bounded amount (ASCII escaping used to
triple an 8 MiB frame of non-ASCII text).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from boxmaker._sockets._streams import send_frame
from boxmaker.proto.audit._audit import RecordSchemaError
from boxmaker.proto.audit._audit_scan import check_record_line
from tests.brokerd.test_serve import Home, ask, connect, echo_call, started
from tests.fakes.audit_log import line_of, one_of_each

LIMIT = 1_179_648


@pytest.fixture
def home() -> Iterator[Home]:
    made = Home()
    yield made
    made.cleanup()


async def ask_utf8(path: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """One request written as UTF-8 (as loopd writes it), every answer frame."""
    client = await connect(path)
    await send_frame(client.stream, json.dumps(obj, ensure_ascii=False).encode())
    out = []
    while (frame := await client.receive()) is not None:
        out.append(frame)
    await client.stream.aclose()
    return out


def log_bytes(home: Home) -> int:
    return sum(p.stat().st_size for p in home.audit.glob("*.jsonl"))


def call_with(text: str, rid: int = 1) -> dict[str, Any]:
    return echo_call(rid) | {"call": {"session": "s1", "tool": "echo", "args": {"text": text}}}


def canonical_bytes(text: str) -> bytes:
    return json.dumps({"text": text}, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("text", ["é" * 600_000, "€" * 2_790_000], ids=["1.2MB", "8.4MB"])
async def test_long_arguments_are_denied_and_left_out_of_the_log(home: Home, text: str) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        before = log_bytes(home)
        answer = await ask_utf8(home.broker, call_with(text))
        assert answer[0]["denied"]["code"] == "bad_args"
        assert f"at most {LIMIT}" in answer[0]["denied"]["reason"]
        call = home.events("call")[-1]
        data = canonical_bytes(text)
        assert call["args"] == {}
        assert call["omitted"] == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        assert home.events("result") == []
        assert log_bytes(home) - before < 2048  # call + decision, whatever the frame held
        handle.stop()


async def test_the_limit_itself_is_allowed(home: Home) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        fits = "a" * (LIMIT - len(canonical_bytes("")))
        assert len(canonical_bytes(fits)) == LIMIT
        answer = await ask(home.broker, call_with(fits))
        assert answer[0]["result"]["status"] == "ok"
        call = home.events("call")[-1]
        assert call["omitted"] is None and call["args"] == {"text": fits}
        over = await ask(home.broker, call_with(fits + "a", rid=2))
        assert over[0]["denied"]["code"] == "bad_args"
        handle.stop()


async def test_a_20_mb_argument_never_reaches_the_log(home: Home) -> None:
    async with trio.open_nursery() as nursery:
        handle = await started(nursery, home)
        before = log_bytes(home)
        body = json.dumps(call_with("x" * 20_000_000)).encode()
        stream = await trio.open_unix_socket(os.fspath(home.broker))
        await stream.send_all(struct.pack(">I", len(body)))  # refused from the header alone
        reply = b""
        while len(reply) < 4 or len(reply) < 4 + struct.unpack(">I", reply[:4])[0]:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            reply += chunk
        await stream.aclose()
        answer = json.loads(reply[4:])
        assert answer["error"]["code"] == "bad_frame"
        assert home.events("call") == [] and log_bytes(home) == before
        handle.stop()


def test_older_call_records_without_omitted_still_verify() -> None:
    legacy, current, omitted = one_of_each()[3], one_of_each()[15], one_of_each()[16]
    assert b'"omitted"' not in line_of(legacy)
    for event in (legacy, current, omitted):
        assert check_record_line(line_of(event)).key == "call"
    damaged = line_of(omitted).replace(b'"args":{}', b'"args":{"a":1}')
    with pytest.raises(RecordSchemaError, match="omitted"):
        check_record_line(damaged)
