"""A scripted fake llama-server: h11 on trio, TCP or Unix socket.

Requests are parsed with h11; answers are written as raw bytes, so a test
controls every chunk boundary, delay and disconnect.  It behaves like the
real server where that matters (fixtures/llama-server/README.md): one HTTP
chunk per event, a new connection per request (it closes after every
answer), a client EOF during a stream counts as a disconnect and stops it.

In process (for ``autojump_clock`` tests)::

    fake = FakeLlamaServer({"turns": [{"replay": "chat-stream-text.http"}]})
    endpoint = await nursery.start(fake.serve)            # TCP on 127.0.0.1:0
    endpoint = await nursery.start(partial(fake.serve, unix_socket=path))

As a subprocess (multi-process tests)::

    python -m tests.fakes.llama_server --script FILE [--host H] [--port P | --unix PATH]

prints one line ``listening on http://H:P`` (or ``listening on unix:PATH``)
and serves until killed.

The script (JSON; every key optional)::

    {
      "health": {"loading": 2},          # the first 2 GET /health answer 503 "Loading model"
                                         #   (-1: always); then 200 {"status":"ok"}
      "props": {"total_slots": 4,        # GET /props: the captured answer with these
                "n_ctx": 262144,         #   values put in (n_ctx is per slot:
                "supports_tool_calls": true},  # default_generation_settings.n_ctx)
      "props_raw": {...},                # or: exactly this JSON value for /props
      "api_key": "sk-...",               # every request but GET /health needs
                                         #   "Authorization: Bearer sk-...", else 401
      "turns": [TURN, ...],              # POST /v1/chat/completions answers, in order
      "default_turn": TURN               # the answer once the turns are used up
    }

GET /slots lists total_slots slots; POST /slots/N?action=save|restore|erase
with {"filename": F} answers like the captures (N wraps modulo total_slots;
restoring a file never saved is the captured 400).  Anything else is 404.
A chat request with no turn left (and no default_turn) gets a 500 error.

A TURN is one of::

    {"replay": "chat-stream-text.http",  # a capture's raw bytes (head and chunked body)
     "split": "chunks",                  # writes: "whole" | "chunks" (one per HTTP chunk,
                                         #   the default) | "bytes" | [sizes, cycled]
     "delay_s": 0,                       # pause between writes
     "truncate": 500}                    # close after this many bytes (mid-chunk)
    {"status": 400, "body": {...} | "text", "content_type": "text/html"}
                                         # an answer before any stream (JSON for an object)
    {"steps": [STEP, ...],               # a scripted stream
     "head_delay_s": 0,                  # pause before the response head (busy slots)
     "head": "HTTP/1.1 500 ...\\r\\n...",   # another head than 200 text/event-stream chunked
     "done": true,                       # end with data: [DONE] (unless an error step)
     "end": "chunked"}                   # then: "chunked" (0-chunk, then close) | "close"

A STEP is one event (one HTTP chunk) or an action::

    {"role": "assistant"}                # the first delta, role only
    {"text": "..."}                      # a content delta
    {"tool_call": {"index": 0, "id": "call0", "name": "read_file",
                   "arguments": ["{\\"pa", "th\\": \\"x\\"}"]}}
                                         # one event with index, id, name and the first
                                         #   fragment, then one event per other fragment
    {"finish": "stop", "timings": {...} | true}   # the finish event (timings optional)
    {"usage": {...} | true, "timings": {...} | true}  # the final choices: [] event
    {"events": [STEP, ...]}              # several events in ONE chunk
    {"ping": true}                       # a ":" comment event
    {"pings": {"every_s": 10, "count": 5}}   # pings with pauses
    {"sleep_s": 1.5}                     # a pause
    {"error": {...}}                     # data: {"error": {...}}, then the end without [DONE]
    {"error_line": {...}}                # the older form: error: {...}
    {"raw": "..."}                       # these bytes (UTF-8) as one chunk
    {"disconnect": true}                 # close the connection now
    {"close_mid_chunk": "data: {..."}    # a chunk header for more bytes than sent, then close

The server records what it saw: `requests` (method, target, headers, body),
`chat_bodies` (decoded JSON), `stream_aborts` (streams the client ended
early, by closing or half-closing) and `eof_before_done` (a client EOF
before the server wrote [DONE]: a half-close or an early close).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import h11
import trio

from boxmaker._http import Endpoint

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "llama-server"
DEFAULT_TIMINGS = {
    "cache_n": 0, "prompt_n": 12, "prompt_ms": 10.0, "prompt_per_token_ms": 0.8,
    "prompt_per_second": 1200.0, "predicted_n": 3, "predicted_ms": 30.0,
    "predicted_per_token_ms": 10.0, "predicted_per_second": 100.0,
}
DEFAULT_USAGE = {"completion_tokens": 3, "prompt_tokens": 12, "total_tokens": 15,
                 "prompt_tokens_details": {"cached_tokens": 0}}


def capture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def capture_json(name: str) -> Any:
    raw = capture(name)
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


def capture_body(name: str) -> bytes:
    """The de-chunked body of a capture, through h11."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(capture(name))
    conn.receive_data(b"")
    body = b""
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return body
        elif event is h11.NEED_DATA:
            raise AssertionError("the capture ended early")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def split_chunks(body: bytes) -> list[bytes]:
    """A chunked body cut into its HTTP chunks (each with its framing)."""
    pieces = []
    pos = 0
    while pos < len(body):
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol], 16)
        end = eol + 2 + size + 2
        if size == 0:
            end = len(body)
        pieces.append(body[pos:end])
        pos = end
    return pieces


def replay_writes(raw: bytes, split: Any) -> list[bytes]:
    head_end = raw.index(b"\r\n\r\n") + 4
    head, body = raw[:head_end], raw[head_end:]
    if split == "whole":
        return [raw]
    if split == "bytes":
        return [raw[i : i + 1] for i in range(len(raw))]
    if split == "chunks":
        is_chunked = b"transfer-encoding: chunked" in head.lower()
        return [head, *(split_chunks(body) if is_chunked else [body])]
    sizes = [int(s) for s in split]
    writes, pos, i = [], 0, 0
    while pos < len(raw):
        writes.append(raw[pos : pos + sizes[i % len(sizes)]])
        pos += sizes[i % len(sizes)]
        i += 1
    return writes


def sse_head() -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nX-Accel-Buffering: no\r\n"
        b"Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Keep-Alive: timeout=5, max=100\r\n\r\n"
    )


def json_answer(status: int, value: Any, *, reason: str | None = None,
                content_type: str = "application/json; charset=utf-8") -> bytes:
    body = value if isinstance(value, bytes) else json.dumps(value).encode()
    reasons = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
               500: "Internal Server Error", 503: "Service Unavailable"}
    return (
        b"HTTP/1.1 %d %s\r\nServer: llama.cpp\r\nContent-Type: %s\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n"
        % (status, (reason or reasons.get(status, "Error")).encode(), content_type.encode(),
           len(body))
    ) + body


def completion_chunk(choices: list[Any], **extra: Any) -> dict[str, Any]:
    return {"choices": choices, "created": 1795935051, "id": "chatcmpl-fake", "model": "fake",
            "system_fingerprint": "fake", "object": "chat.completion.chunk", **extra}


def data_event(value: Any) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def delta_event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"finish_reason": finish, "index": 0, "delta": delta}
    return data_event(completion_chunk([choice], **extra))


def step_events(step: dict[str, Any]) -> list[bytes]:
    """The SSE events (each one chunk) a content step produces."""
    if "role" in step:
        return [delta_event({"role": step["role"], "content": None})]
    if "text" in step:
        return [delta_event({"content": step["text"]})]
    if "tool_call" in step:
        call = step["tool_call"]
        fragments = call.get("arguments", [""])
        if isinstance(fragments, str):
            fragments = [fragments]
        first = {"index": call.get("index", 0), "id": call["id"], "type": "function",
                 "function": {"name": call["name"], "arguments": fragments[0] if fragments else ""}}
        out = [delta_event({"tool_calls": [first]})]
        for piece in fragments[1:]:
            rest = {"index": call.get("index", 0), "function": {"arguments": piece}}
            out.append(delta_event({"tool_calls": [rest]}))
        return out
    if "finish" in step:
        extra = {}
        if step.get("timings"):
            extra["timings"] = DEFAULT_TIMINGS if step["timings"] is True else step["timings"]
        return [delta_event({}, step["finish"], **extra)]
    if "usage" in step:
        usage = DEFAULT_USAGE if step["usage"] is True else step["usage"]
        extra = {"usage": usage}
        if step.get("timings", True):
            extra["timings"] = DEFAULT_TIMINGS if step.get("timings", True) is True \
                else step["timings"]
        return [data_event(completion_chunk([], **extra))]
    if "ping" in step:
        return [b":\n\n"]
    if "raw" in step:
        return [step["raw"].encode()]
    if "events" in step:
        return [b"".join(b"".join(step_events(s)) for s in step["events"])]
    raise ValueError(f"unknown step {step!r}")


@attrs.define
class RecordedRequest:
    method: str
    target: str
    headers: list[tuple[bytes, bytes]]
    body: bytes


class _ClientGone(Exception):
    pass


class _Gone:
    """Set when the client sent EOF; `done_written` once [DONE] went out."""

    def __init__(self) -> None:
        self.done_written = False
        self.tail = b""
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


@attrs.define
class FakeLlamaServer:
    script: dict[str, Any] = attrs.field(factory=dict)
    requests: list[RecordedRequest] = attrs.field(factory=list)
    chat_bodies: list[Any] = attrs.field(factory=list)
    stream_aborts: int = 0
    eof_before_done: int = 0
    health_polls: int = 0
    saved_files: set[str] = attrs.field(factory=set)
    _turn: int = 0

    # -- serving ------------------------------------------------------------

    async def serve(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        unix_socket: Path | None = None,
        task_status: trio.TaskStatus[Endpoint] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        if unix_socket is not None:
            sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
            await sock.bind(str(unix_socket))
            sock.listen(64)
            listeners: list[trio.SocketListener] = [trio.SocketListener(sock)]
            endpoint = Endpoint.unix(unix_socket)
        else:
            listeners = await trio.open_tcp_listeners(port, host=host)
            bound = listeners[0].socket.getsockname()
            endpoint = Endpoint.tcp(bound[0], bound[1])
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(partial(trio.serve_listeners, self._handle, [listener]))
            task_status.started(endpoint)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            await self._handle_one(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, _ClientGone, OSError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _handle_one(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return
        assert request is not None
        recorded = RecordedRequest(request.method.decode(), request.target.decode(),
                                   [(bytes(k), bytes(v)) for k, v in request.headers], body)
        self.requests.append(recorded)
        await self._route(stream, recorded)

    async def _route(self, stream: trio.SocketStream, req: RecordedRequest) -> None:
        path, _, query = req.target.partition("?")
        key = self.script.get("api_key")
        if req.method == "GET" and path == "/health":  # public, as llama-server's
            await stream.send_all(self._health())
        elif key is not None and (b"authorization", b"Bearer " + key.encode()) not in [
                (name.lower(), value) for name, value in req.headers]:
            await stream.send_all(json_answer(401, {"error": {
                "code": 401, "message": "Invalid API Key", "type": "authentication_error"}},
                reason="Unauthorized"))
        elif req.method == "GET" and path == "/props":
            await stream.send_all(json_answer(200, self._props()))
        elif req.method == "GET" and path == "/slots":
            await stream.send_all(json_answer(200, self._slots()))
        elif req.method == "POST" and path.startswith("/slots/"):
            await stream.send_all(self._slot_action(path, query, req.body))
        elif req.method == "POST" and path == "/v1/chat/completions":
            try:
                self.chat_bodies.append(json.loads(req.body))
            except ValueError:
                self.chat_bodies.append(None)
            await self._chat(stream)
        else:
            await stream.send_all(json_answer(404, {"error": {
                "code": 404, "message": "File Not Found", "type": "not_found_error"}}))

    # -- simple answers -----------------------------------------------------------

    def _health(self) -> bytes:
        self.health_polls += 1
        loading = self.script.get("health", {}).get("loading", 0)
        if loading < 0 or self.health_polls <= loading:
            return capture("health-loading.http")
        return capture("health-ok.http")

    def _props(self) -> Any:
        if "props_raw" in self.script:
            return self.script["props_raw"]
        props = capture_json("props.http")
        want = self.script.get("props", {})
        props["total_slots"] = want.get("total_slots", 4)
        props["default_generation_settings"]["n_ctx"] = want.get("n_ctx", 262144)
        props["chat_template_caps"]["supports_tool_calls"] = want.get("supports_tool_calls", True)
        return props

    def _slot_count(self) -> int:
        return int(self.script.get("props", {}).get("total_slots", 4))

    def _slots(self) -> Any:
        template = capture_json("slots.http")[0]
        n_ctx = self.script.get("props", {}).get("n_ctx", 262144)
        return [{**template, "id": i, "n_ctx": n_ctx} for i in range(self._slot_count())]

    def _slot_action(self, path: str, query: str, body: bytes) -> bytes:
        try:
            slot = int(path.removeprefix("/slots/")) % self._slot_count()
            filename = json.loads(body).get("filename", "") if body else ""
        except ValueError:
            return json_answer(400, {"error": {"code": 400, "message": "bad slot request",
                                               "type": "invalid_request_error"}})
        if query == "action=save":
            self.saved_files.add(filename)
            return json_answer(200, {"id_slot": slot, "filename": filename, "n_saved": 68,
                                     "n_written": 1255796, "timings": {"save_ms": 1.05}})
        if query == "action=restore":
            if filename not in self.saved_files:
                return capture("slot-restore-missing.http")
            return json_answer(200, {"id_slot": slot, "filename": filename, "n_restored": 68,
                                     "n_read": 1255796, "timings": {"restore_ms": 0.549}})
        if query == "action=erase":
            return json_answer(200, {"id_slot": slot, "n_erased": 68})
        return json_answer(400, {"error": {"code": 400, "message": "Invalid action",
                                           "type": "invalid_request_error"}})

    # -- chat ------------------------------------------------------------------------

    async def _chat(self, stream: trio.SocketStream) -> None:
        turns = self.script.get("turns", [])
        if self._turn < len(turns):
            turn = turns[self._turn]
            self._turn += 1
        elif "default_turn" in self.script:
            turn = self.script["default_turn"]
        else:
            await stream.send_all(json_answer(500, {"error": {
                "code": 500, "message": "fake: no scripted turn left", "type": "server_error"}}))
            return
        if "status" in turn:
            value = turn.get("body", {"error": {"code": turn["status"], "message": "scripted",
                                                "type": "server_error"}})
            content_type = turn.get("content_type", "application/json; charset=utf-8")
            await stream.send_all(json_answer(
                turn["status"], value.encode() if isinstance(value, str) else value,
                content_type=content_type))
            return
        async with trio.open_nursery() as nursery:
            gone = _Gone()
            nursery.start_soon(self._watch_eof, stream, gone)
            try:
                if "replay" in turn:
                    await self._replay(stream, turn, gone)
                else:
                    await self._steps(stream, turn, gone)
            except (trio.BrokenResourceError, _ClientGone, OSError):
                if not gone.done_written:
                    self.stream_aborts += 1
            nursery.cancel_scope.cancel()

    async def _watch_eof(self, stream: trio.SocketStream, gone: _Gone) -> None:
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        gone.set()

    async def _write(self, stream: trio.SocketStream, data: bytes, gone: _Gone) -> None:
        if gone.is_set():
            raise _ClientGone
        await stream.send_all(data)
        gone.tail = (gone.tail + data[-64:])[-64:]
        if b"data: [DONE]" in gone.tail:
            gone.done_written = True

    def _note_eof_before_done(self, gone: _Gone) -> None:
        if gone.is_set():
            self.eof_before_done += 1

    async def _replay(self, stream: trio.SocketStream, turn: dict[str, Any],
                      gone: _Gone) -> None:
        raw = capture(turn["replay"])
        truncate = turn.get("truncate")
        if truncate is not None:
            raw = raw[:truncate]
        delay = turn.get("delay_s", 0)
        for i, piece in enumerate(replay_writes(raw, turn.get("split", "chunks"))):
            if i and delay:
                await trio.sleep(delay)
            if b"[DONE]" in piece:
                self._note_eof_before_done(gone)
            await self._write(stream, piece, gone)

    async def _steps(self, stream: trio.SocketStream, turn: dict[str, Any],
                     gone: _Gone) -> None:
        if turn.get("head_delay_s"):
            await trio.sleep(turn["head_delay_s"])
        head = turn["head"].encode() if "head" in turn else sse_head()
        await self._write(stream, head, gone)
        ended = False
        for step in turn.get("steps", []):
            if "sleep_s" in step:
                await trio.sleep(step["sleep_s"])
            elif "pings" in step:
                for _ in range(step["pings"]["count"]):
                    await trio.sleep(step["pings"]["every_s"])
                    await self._write(stream, chunk(b":\n\n"), gone)
            elif "disconnect" in step:
                return
            elif "close_mid_chunk" in step:
                data = step["close_mid_chunk"].encode()
                await self._write(stream, b"%x\r\n%s" % (len(data) + 100, data), gone)
                return
            elif "error" in step:
                await self._write(stream, chunk(data_event({"error": step["error"]})), gone)
                ended = True
                break
            elif "error_line" in step:
                line = b"error: " + json.dumps(step["error_line"]).encode() + b"\n\n"
                await self._write(stream, chunk(line), gone)
                ended = True
                break
            else:
                for event in step_events(step):
                    await self._write(stream, chunk(event), gone)
        if not ended and turn.get("done", True):
            self._note_eof_before_done(gone)
            await self._write(stream, chunk(b"data: [DONE]\n\n"), gone)
        if turn.get("end", "chunked") == "chunked":
            await self._write(stream, b"0\r\n\r\n", gone)


async def _main(args: argparse.Namespace) -> None:
    script = json.loads(Path(args.script).read_text()) if args.script else {}
    fake = FakeLlamaServer(script)
    async with trio.open_nursery() as nursery:
        unix = Path(args.unix) if args.unix else None
        endpoint = await nursery.start(partial(fake.serve, host=args.host, port=args.port,
                                               unix_socket=unix))
        print(f"listening on {endpoint}", flush=True)
        await trio.sleep(math.inf)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.llama_server",
                                     description=__doc__.split("\n", 1)[0] if __doc__ else "")
    parser.add_argument("--script", help="the JSON script (see the module docstring)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--unix", help="serve on this Unix socket instead of TCP")
    args = parser.parse_args(argv)
    try:
        trio.run(_main, args)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
