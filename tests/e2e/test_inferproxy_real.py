"""inferproxy in front of the real llama-server: what loopd sees through it."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from boxmaker._http import Endpoint, TextDelta, Timeouts, chat_request_body
from boxmaker._http.client import LlamaClient, fetch
from boxmaker.inferproxy._config import Upstream
from boxmaker.inferproxy._proxy import ProxySettings
from boxmaker.inferproxy._serve import bind_listener, serve
from tests.e2e.conftest import LlamaServer, wait_slot_idle

pytestmark = pytest.mark.llama

TIMEOUTS = Timeouts(connect_s=10, first_event_s=120, idle_s=60, total_s=300)


@asynccontextmanager
async def proxied(server: LlamaServer) -> AsyncIterator[LlamaClient]:
    directory = Path(tempfile.mkdtemp(prefix="bxe2e"))
    path = directory / "infer.sock"
    settings = ProxySettings(upstream=Upstream(scheme="http", host=server.host,
                                               port=server.port),
                             api_key="e2e-key", tls=None, max_request_bytes=8 * 1024 * 1024)
    sock = bind_listener(path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, settings, sock)
            yield LlamaClient(Endpoint.unix(path), timeouts=TIMEOUTS)
            nursery.cancel_scope.cancel()
    finally:
        sock.close()
        shutil.rmtree(directory, ignore_errors=True)


def body(text: str, max_tokens: int, **extra: object) -> bytes:
    value = json.loads(chat_request_body([{"role": "user", "content": text}], model="local",
                                         slot=0, temperature=0.0))
    value["max_tokens"] = max_tokens
    value.update(extra)
    return json.dumps(value).encode()


async def test_props_and_a_stream_through_the_proxy(llama_server: LlamaServer) -> None:
    with trio.fail_after(300):
        async with proxied(llama_server) as llama:
            props = await llama.props()
            pieces = []
            async with llama.chat(body("Say hello.", 6)) as stream:
                async for delta in stream:
                    if isinstance(delta, TextDelta):
                        pieces.append(delta.text)
                result = stream.result()
            refused = await fetch(llama.endpoint, "GET", "/metrics")
    assert (props.total_slots, props.n_ctx) == (2, 4096)
    assert len(pieces) > 1 and result.text == "".join(pieces)
    assert refused.status == 403


async def test_a_stream_cancelled_through_the_proxy_stops_the_generation(
    llama_server: LlamaServer,
) -> None:
    with trio.fail_after(300):
        async with proxied(llama_server) as llama:
            # minutes of work unless the cancellation reaches the server
            async with llama.chat(body("Tell a very long story.", 2000,
                                       ignore_eos=True)) as stream:
                async for delta in stream:
                    if isinstance(delta, TextDelta):
                        break
            await wait_slot_idle(llama, 0, within_s=20)
            async with llama.chat(body("Say yes.", 2)) as stream:
                async for _ in stream:
                    pass
                assert stream.result().finish_reason in ("length", "stop")
            assert await llama.health() == "ok"
