"""The fake llama-server of `scripts/bench/turn` (trio + h11, TCP on 127.0.0.1).

    python scripts/bench/_turn_server.py [--events N] [--interval-us U]
                                         [--slots S] [--n-ctx C]

prints ``listening on PORT`` on stdout once it accepts connections, then
serves until killed.  It answers what loopd asks of a llama-server:

- ``GET /health``: 200 ``{"status":"ok"}``;
- ``GET /props``: `total_slots` = S, ``default_generation_settings.n_ctx`` = C,
  ``chat_template_caps.supports_tool_calls`` true (loopd's self-test);
- ``GET /slots`` and ``POST /slots/N?action=save|restore|erase``: success;
- ``POST /v1/chat/completions``: a 200 ``text/event-stream``, chunked, with N
  ``chat.completion.chunk`` events, one HTTP chunk each, whose
  ``delta.content`` is the CLOCK_MONOTONIC time (``time.monotonic_ns()``, a
  decimal string) taken right before that chunk is written; one every U µs
  (a pace, so that latency is measured and no queue builds up); then a finish
  event, a usage event with timings, and ``data: [DONE]``.

Every answer carries ``Connection: close`` and the connection is closed after
it (llama-server's own behaviour for streams).  Standard library, trio and h11
only: the bench does not depend on the test tree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from functools import partial
from typing import Any

import h11
import trio

CHUNK_ID = "chatcmpl-bench-turn"
MODEL = "bench-turn"


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + _json(payload) + b"\n\n"


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"choices": choices, "created": int(time.time()), "id": CHUNK_ID, "model": MODEL,
            "object": "chat.completion.chunk", **extra}


# the text event, split around its stamp so that only the number is formatted
# between taking the time and writing the chunk
_TEXT_HEAD, _TEXT_TAIL = _event(_chunk(
    [{"finish_reason": None, "index": 0, "delta": {"content": "STAMP"}}])).split(b"STAMP")


class Server:
    def __init__(self, *, events: int, interval_s: float, slots: int, n_ctx: int) -> None:
        self.events = events
        self.interval_s = interval_s
        self.slots = slots
        self.n_ctx = n_ctx

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            async with stream:
                await self._handle(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError,
                OSError) as exc:
            print(f"bench server: connection ended: {exc!r}", file=sys.stderr)

    async def _handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                return
        assert request is not None
        method = request.method.decode()
        target = request.target.decode()
        path, _, query = target.partition("?")
        if method == "POST" and path == "/v1/chat/completions":
            await self._stream_chat(stream, conn)
            return
        body: Any
        if method == "GET" and path == "/health":
            status, body = 200, {"status": "ok"}
        elif method == "GET" and path == "/props":
            status, body = 200, {
                "default_generation_settings": {"n_ctx": self.n_ctx},
                "total_slots": self.slots,
                "model_alias": MODEL,
                "chat_template_caps": {"supports_tool_calls": True},
            }
        elif method == "GET" and path == "/slots":
            status, body = 200, [{"id": i, "n_ctx": self.n_ctx, "is_processing": False}
                                 for i in range(self.slots)]
        elif method == "POST" and path.startswith("/slots/") and query.startswith("action="):
            slot = int(path.removeprefix("/slots/"))
            action = query.removeprefix("action=")
            count = {"save": "n_saved", "restore": "n_restored", "erase": "n_erased"}[action]
            body = {"id_slot": slot, count: 0}
            if action != "erase":
                body["filename"] = "bench.bin"
                body["timings"] = {f"{action}_ms": 0.0}
            status = 200
        else:
            status, body = 404, {"error": {"code": 404, "message": "File Not Found",
                                           "type": "not_found_error"}}
        data = _json(body)
        await stream.send_all(conn.send(h11.Response(status_code=status, headers=[
            ("Content-Type", "application/json; charset=utf-8"),
            ("Content-Length", str(len(data))),
            ("Connection", "close"),
        ])) + conn.send(h11.Data(data=data)) + conn.send(h11.EndOfMessage()))

    async def _stream_chat(self, stream: trio.SocketStream, conn: h11.Connection) -> None:
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=[
            ("Content-Type", "text/event-stream"),
            ("Transfer-Encoding", "chunked"),
            ("Connection", "close"),
        ])))
        await stream.send_all(conn.send(h11.Data(data=_event(_chunk(
            [{"finish_reason": None, "index": 0,
              "delta": {"role": "assistant", "content": None}}])))))
        for _ in range(self.events):
            await trio.sleep(self.interval_s)
            stamp = time.monotonic_ns()
            await stream.send_all(conn.send(h11.Data(
                data=_TEXT_HEAD + str(stamp).encode() + _TEXT_TAIL)))
        n = self.events
        finish = _event(_chunk([{"finish_reason": "stop", "index": 0, "delta": {}}]))
        usage = _event(_chunk(
            [],
            usage={"completion_tokens": n, "prompt_tokens": 10, "total_tokens": n + 10},
            timings={"cache_n": 0, "prompt_n": 10, "prompt_ms": 1.0, "predicted_n": n,
                     "predicted_ms": float(n), "prompt_per_second": 10000.0,
                     "predicted_per_second": 1000.0},
        ))
        await stream.send_all(conn.send(h11.Data(data=finish + usage)))
        await stream.send_all(conn.send(h11.Data(data=b"data: [DONE]\n\n"))
                              + conn.send(h11.EndOfMessage()))


async def main(args: argparse.Namespace) -> None:
    server = Server(events=args.events, interval_s=args.interval_us / 1e6, slots=args.slots,
                    n_ctx=args.n_ctx)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0,
                                                host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        print(f"listening on {port}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the fake llama-server of scripts/bench/turn")
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--interval-us", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--n-ctx", type=int, default=262144)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(main, parser.parse_args())
