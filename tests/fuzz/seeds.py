"""Seed inputs of every fuzz target, taken from the project's fixtures.

`scripts/fuzz --seed` writes them to tests/fuzz/corpus/TARGET/seed-<hash>
(committed); tests/fuzz/test_fuzz.py checks that the committed corpus holds
every seed and that every target accepts its whole corpus.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from boxmaker.proto import encode_frame
from boxmaker.proto.audit._audit import Record, encode_record
from boxmaker.stack._home import write_starter_home
from tests.fakes.audit_log import TS, one_of_each, valid_log
from tests.fuzz.targets import FILE_BREAK

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "fixtures"
CORPUS = Path(__file__).resolve().parent / "corpus"
SEEDS: dict[str, Callable[[], list[bytes]]] = {}


def seeds_of(name: str) -> Callable[[Callable[[], list[bytes]]], Callable[[], list[bytes]]]:
    def register(function: Callable[[], list[bytes]]) -> Callable[[], list[bytes]]:
        SEEDS[name] = function
        return function
    return register


def wire(prefix: str) -> list[bytes]:
    """The wire fixtures of one kind, compact (as sent) and as stored."""
    out = []
    for path in sorted((FIXTURES / "wire").glob(f"{prefix}-*.json")):
        raw = path.read_bytes()
        out.append(json.dumps(json.loads(raw), separators=(",", ":")).encode())
    return out


for _kind in ("broker-request", "broker-answer", "admin-request", "admin-answer",
              "loop-request"):
    SEEDS[_kind] = lambda kind=_kind: wire(kind)  # type: ignore[misc]
SEEDS["loop-frame"] = lambda: wire("loop-answer") + wire("loop-event")


@seeds_of("frame")
def frame() -> list[bytes]:
    bodies = wire("broker-request") + wire("admin-answer")
    return [encode_frame(b) for b in bodies] + [encode_frame(bodies[0]) + encode_frame(bodies[1])]


def captures() -> Iterator[tuple[str, bytes, bytes]]:
    """(name, head, chunked body) of every streamed llama-server capture."""
    for path in sorted((FIXTURES / "llama-server").glob("chat-stream-*.http")):
        head, _, body = path.read_bytes().partition(b"\r\n\r\n")
        yield path.name, head, body


def dechunk(body: bytes) -> bytes:
    out, pos = [], 0
    while True:
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[eol + 2: eol + 2 + size])
        pos = eol + 2 + size + 2


@seeds_of("chunked")
def chunked() -> list[bytes]:
    return [body for _, _, body in captures()] + [b"5;ext=1 \r\nhello\r\n0\r\nX-T: 1\r\n\r\n"]


@seeds_of("sse")
def sse() -> list[bytes]:
    return [dechunk(body) for _, _, body in captures()] + [
        b"\xef\xbb\xbfevent: x\r\nid: 1\r\nretry: 10\r\n: comment\r\ndata: a\rdata: b\n\n"]


@seeds_of("llama-chunk")
def llama_chunk() -> list[bytes]:
    out = []
    for _, _, body in captures():
        lines = [line[6:] for line in dechunk(body).split(b"\n") if line.startswith(b"data: {")]
        out.append(b"\n".join(lines))
    return out


@seeds_of("infer-request")
def infer_request() -> list[bytes]:
    return [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n"
        b"Authorization: Bearer client\r\n\r\n{}",
        b"GET /props HTTP/1.1\r\nHost: x\r\nProxy-Authorization: a\r\nTE: trailers\r\n\r\n",
        b"POST /slots/0?action=save HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n",
    ]


@seeds_of("grants")
def grants() -> list[bytes]:
    return [p.read_bytes() for p in sorted((FIXTURES / "grants").rglob("*.toml"))]


def starter_configs() -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for image in (None, "localhost/boxmaker-tools:abc"):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            write_starter_home(home, upstream="http://127.0.0.1:8080", demo_notes=Path(tmp) / "n",
                               tools_image=image, max_tokens=512)
            for name in ("brokerd", "loopd", "inferproxy", "bxctl"):
                text = (home / f"{name}.toml").read_text().replace(tmp, "/var/lib")
                out.setdefault(name, []).append(text.encode())
    return out


for _name in ("brokerd", "loopd", "inferproxy", "bxctl"):
    SEEDS[f"config-{_name}"] = lambda name=_name: starter_configs()[name]  # type: ignore[misc]


@seeds_of("state")
def state() -> list[bytes]:
    return [b'{"label":"public","untrusted":false,"seq":0}',
            b'{"label": "secret", "untrusted": true, "seq": 1209}']


@seeds_of("conversation-line")
def conversation_line() -> list[bytes]:
    return [
        b'{"role":"user","content":"read my notes","tool_calls":null,"tool_call_id":null,'
        b'"interrupted":false,"ts":"2026-11-29T07:00:00.000000Z"}',
        b'{"role":"assistant","content":null,"tool_calls":[{"id":"c1","name":"read_file",'
        b'"arguments":"{\\"path\\": \\"/n/a.md\\"}"}],"tool_call_id":null,"interrupted":false,'
        b'"ts":"2026-11-29T07:00:00.000000Z"}',
        b'{"role":"tool","content":"{\\"ok\\":1}","tool_calls":null,"tool_call_id":"c1",'
        b'"interrupted":false,"ts":"2026-11-29T07:00:00.000000Z"}',
    ]


@seeds_of("audit-line")
def audit_line() -> list[bytes]:
    return [encode_record(Record(seq=7, ts=TS, prev="9f" * 32, event=event))
            for event in one_of_each()]


@seeds_of("chain")
def chain() -> list[bytes]:
    log = valid_log(calls=6, files=2)
    whole = FILE_BREAK.join(b"".join(lines) for _, lines in sorted(log.files.items()))
    one = b"".join(next(iter(log.files.values())))
    return [whole, one, one[:-7]]


@seeds_of("toolkit-request")
def toolkit_request() -> list[bytes]:
    return [
        b'{"args":{"path":"/notes/a.md"},"limits":{"output_max_bytes":65536}}',
        b'{"args":{"url":"https://docs.python.org/3/","method":"GET"},'
        b'"limits":{"output_max_bytes":1024},"egress":{"socket":"/run/egress.sock"}}',
    ]


@seeds_of("tool-args")
def tool_args() -> list[bytes]:
    out = []
    for raw in wire("broker-request"):
        call = json.loads(raw).get("call")
        if isinstance(call, dict):
            out.append(json.dumps({"tool": call["tool"], "args": call["args"]}).encode())
    out.append(b'{"tool":"write_file","args":{"path":"/n/x","content":"hi","mode":"append"}}')
    out.append(b'{"tool":"list_dir","args":{"path":"/n"}}')
    return out


@seeds_of("socks5")
def socks5() -> list[bytes]:
    host = b"docs.python.org"
    domain = b"\x05\x01\x00\x03" + bytes([len(host)]) + host + b"\x01\xbb"
    return [
        b"\x05\x01\x00" + domain,
        b"\x05\x02\x02\x00" + domain + b"GET / HTTP/1.1\r\n\r\n",
        b"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50",
        b"\x05\x01\x00\x05\x01\x00\x04" + bytes(16) + b"\x01\xbb",
        b"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
        b"\x05\x01\x00" + domain + domain,
    ]


@seeds_of("selftest-crash")
def selftest_crash() -> list[bytes]:
    return [b"x"]


def seed_name(data: bytes) -> str:
    return "seed-" + hashlib.sha1(data).hexdigest()[:16]


def write_seeds(corpus: Path = CORPUS) -> dict[str, int]:
    """Write every target's seeds into its corpus directory; the counts written."""
    counts = {}
    for name, make in sorted(SEEDS.items()):
        if name.startswith("selftest"):
            continue
        directory = corpus / name
        directory.mkdir(parents=True, exist_ok=True)
        seeds = make()
        for data in seeds:
            (directory / seed_name(data)).write_bytes(data)
        counts[name] = len(seeds)
    return counts
