"""The fuzz targets: one function per parser, fed arbitrary bytes (scripts/fuzz).

Each target calls one parser the way the daemons call it and lets through only
the parser's documented refusal (a DecodeError, a ConfigError, ...); any other
exception is a crash.  Where there is an oracle the target checks it too:
  - a decoded message re-encodes to bytes that decode to the same message;
  - a parser fed in pieces gives what it gives fed at once (frames, SSE, chunked);
  - the chunked decoder agrees with h11, the audit line scanner with the strict
    record parser;
  - the SOCKS5 proxy only ever answers well-formed replies and never lets a
    CONNECT through to anything but its sealed host.
Imported by scripts/fuzz inside atheris' instrumentation (so boxmaker's modules
get coverage), and by tests/fuzz/test_fuzz.py for the regression inputs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import h11
import trio
import trio.testing

from boxmaker._brokerd_config import parse_config as parse_brokerd_config
from boxmaker._errors import ConfigError
from boxmaker._http import ChatAssembler, InferenceError, decode_chunk
from boxmaker._http._chunked import ChunkedDecoder, ChunkedError
from boxmaker._http._sse import SSEError, SSEEvent, SSEParser
from boxmaker._toml import TomlFileError, parse_toml
from boxmaker.brokerd._state import parse_state
from boxmaker.brokerd.runner._egress import EgressProxy, Seal
from boxmaker.bxctl._config import BxctlFile
from boxmaker.inferproxy._config import InferproxyFile
from boxmaker.inferproxy._config import resolve as resolve_inferproxy
from boxmaker.inferproxy._proxy import _framing as request_framing
from boxmaker.inferproxy._rules import HOP_BY_HOP, is_forwarded, upstream_request_headers
from boxmaker.loopd._config import LoopdFile
from boxmaker.loopd._config import resolve as resolve_loopd
from boxmaker.loopd._conversations import Message
from boxmaker.policy import _grants
from boxmaker.proto import DecodeError, FrameDecoder, FrameError, decode, encode, encode_frame
from boxmaker.proto._json import loads_object
from boxmaker.proto.audit._audit import encode_record, event_key, parse_record
from boxmaker.proto.audit._audit_scan import check_record_line
from boxmaker.proto.audit._chain_report import report_json
from boxmaker.proto.audit._verify import ChainVerifier
from boxmaker.proto.tools import CATALOGUE, ArgsError, parse_args
from boxmaker.proto.wire._wire_admin import (
    decode_admin_answer,
    decode_admin_request,
    encode_admin_answer,
    encode_admin_request,
)
from boxmaker.proto.wire._wire_broker import (
    decode_broker_answer,
    decode_broker_request,
    encode_broker_answer,
    encode_broker_request,
)
from boxmaker.proto.wire._wire_loop import (
    decode_loop_frame,
    decode_loop_request,
    encode_loop_frame,
    encode_loop_request,
)
from boxmaker.toolkit.__main__ import _parse_request as parse_toolkit_request
from boxmaker.toolkit._errors import ToolError

Target = Callable[[bytes], None]
TARGETS: dict[str, Target] = {}
# Files of a chain target's input are separated by this (a NUL cannot be in a record).
FILE_BREAK = b"\x00\x00"


def target(name: str) -> Callable[[Target], Target]:
    def register(function: Target) -> Target:
        TARGETS[name] = function
        return function
    return register


def pieces(data: bytes) -> list[bytes]:
    """`data` cut at a spread of points that depends on the data (so that the
    fuzzer explores splits too): pieces of 1..7 bytes, longer for long inputs."""
    step = (len(data) % 7 + 1) * max(1, len(data) // 256)
    return [data[i:i + step] for i in range(0, len(data), step)]


# -- framing and each socket's messages ----------------------------------------


def _frames(chunks: list[bytes]) -> tuple[list[bytes], bool]:
    decoder = FrameDecoder(max_frame=64 * 1024)
    bodies: list[bytes] = []
    try:
        for chunk in chunks:
            decoder.feed(chunk)
            while (body := decoder.next_frame()) is not None:
                bodies.append(body)
    except FrameError:
        return bodies, True
    return bodies, False


@target("frame")
def frame(data: bytes) -> None:
    # A bad header is refused as soon as its 4 bytes are there, even behind a
    # complete frame not yet taken (tests/proto/test_framing.py), so a split
    # can only deliver more frames before the refusal, never other ones.
    whole, whole_failed = _frames([data])
    split, split_failed = _frames(pieces(data))
    assert split[: len(whole)] == whole, "frames depend on the split"
    assert whole_failed == split_failed, "the refusal depends on the split"
    if not whole_failed:
        assert whole == split, "frames depend on the split"
    consumed = b"".join(encode_frame(body) for body in split)
    assert data.startswith(consumed), "frames are not a prefix of the input"


def _round_trip(decode_fn: Callable[[bytes], object], encode_fn: Callable[[object], bytes],
                data: bytes) -> None:
    try:
        message = decode_fn(data)
    except DecodeError:
        return
    again = decode_fn(encode_fn(message))
    assert again == message, "a decoded message does not survive re-encoding"


@target("broker-request")
def broker_request(data: bytes) -> None:
    _round_trip(decode_broker_request, encode_broker_request, data)  # type: ignore[arg-type]


@target("broker-answer")
def broker_answer(data: bytes) -> None:
    _round_trip(decode_broker_answer, lambda pair: encode_broker_answer(*pair), data)  # type: ignore[misc]


@target("admin-request")
def admin_request(data: bytes) -> None:
    _round_trip(decode_admin_request, encode_admin_request, data)  # type: ignore[arg-type]


@target("admin-answer")
def admin_answer(data: bytes) -> None:
    _round_trip(decode_admin_answer, lambda pair: encode_admin_answer(*pair), data)  # type: ignore[misc]


@target("loop-request")
def loop_request(data: bytes) -> None:
    _round_trip(decode_loop_request, encode_loop_request, data)  # type: ignore[arg-type]


@target("loop-frame")
def loop_frame(data: bytes) -> None:
    _round_trip(decode_loop_frame, lambda pair: encode_loop_frame(*pair), data)  # type: ignore[misc]


# -- inference: SSE, chunked, the streamed chunks --------------------------------


def _sse(chunks: list[bytes]) -> tuple[list[SSEEvent], bool, bool]:
    parser = SSEParser(max_event_bytes=4096)
    events: list[SSEEvent] = []
    try:
        for chunk in chunks:
            events.extend(parser.feed(chunk))
    except SSEError:
        return events, True, False
    return events, False, parser.close()


@target("sse")
def sse(data: bytes) -> None:
    whole = _sse([data])
    split = _sse(pieces(data))
    if not whole[1] and not split[1]:
        assert whole == split, "SSE events depend on the split"


def _chunked(chunks: list[bytes]) -> tuple[bytes, bool, bool]:
    decoder = ChunkedDecoder()
    out = []
    try:
        for chunk in chunks:
            out.append(decoder.feed(chunk))
    except ChunkedError:
        return b"".join(out), True, decoder.done
    return b"".join(out), False, decoder.done


_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _h11_chunked(data: bytes) -> tuple[bytes, bool, bool]:
    """h11's reading of `data` as a chunked body (the oracle)."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(_CHUNKED_HEAD + data)
    out = []
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return b"".join(out), False, False
            if isinstance(event, h11.Data):
                out.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(out), False, True
    except h11.RemoteProtocolError:
        return b"".join(out), True, False


@target("chunked")
def chunked(data: bytes) -> None:
    whole = _chunked([data])
    split = _chunked(pieces(data))
    if not whole[1] and not split[1]:
        assert whole == split, "chunked output depends on the split"
    if len(data) > 4000:
        return  # the line limits of the two differ; below them they must agree
    theirs = _h11_chunked(data)
    ours_failed, ours_done = whole[1], whole[2]
    if ours_done and not theirs[1]:
        assert theirs[2] and theirs[0] == whole[0], "chunked disagrees with h11"
    if theirs[2] and not ours_failed:
        assert ours_done and whole[0] == theirs[0], "chunked disagrees with h11"


@target("llama-chunk")
def llama_chunk(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return  # the SSE parser hands over text only
    assembler = ChatAssembler()
    try:
        for line in text.split("\n"):
            for delta in decode_chunk(line):
                assembler.add(delta)
        assembler.result()
    except InferenceError:
        return


@target("infer-request")
def infer_request(data: bytes) -> None:
    """infer.sock: a request head as h11 reads it, then inferproxy's rules."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return
    if not isinstance(event, h11.Request):
        return
    headers = [(bytes(n), bytes(v)) for n, v in event.headers.raw_items()]
    is_forwarded(bytes(event.method), bytes(event.target))
    length, is_chunked = request_framing(headers)
    for api_key in (None, "k3y"):
        out = upstream_request_headers(headers, host=b"127.0.0.1:8080", api_key=api_key,
                                       content_length=length, chunked=is_chunked)
        names = [name.lower() for name, _ in out]
        assert names.count(b"host") == 1 and out[0] == (b"Host", b"127.0.0.1:8080")
        assert names.count(b"authorization") == (api_key is not None), "a client's key leaks"
        assert names.count(b"connection") == 1 and out[-1 - (api_key is not None)] == (
            b"Connection", b"close")
        hop = [n for n in names if n in HOP_BY_HOP or n.startswith(b"proxy-")]
        assert sorted(hop) == [b"connection"] + [b"transfer-encoding"] * is_chunked, hop


# -- the owner's files ---------------------------------------------------------


@target("grants")
def grants(data: bytes) -> None:
    state = _grants.parse_grant_texts({"10-fuzz.toml": data})
    if isinstance(state, _grants.InvalidGrantSet):
        assert state.report.problems, "an invalid grant set without a problem"


@target("config-brokerd")
def config_brokerd(data: bytes) -> None:
    try:
        parse_brokerd_config(data, Path("/etc/boxmaker/brokerd.toml"), own_uid=1000)
    except ConfigError:
        return


@target("config-loopd")
def config_loopd(data: bytes) -> None:
    try:
        resolve_loopd(parse_toml(data, LoopdFile), Path("/etc/boxmaker/loopd.toml"))
    except (TomlFileError, ConfigError):
        return


@target("config-inferproxy")
def config_inferproxy(data: bytes) -> None:
    try:
        resolve_inferproxy(parse_toml(data, InferproxyFile), Path("/etc/boxmaker/inferproxy.toml"))
    except (TomlFileError, ConfigError):
        return


@target("config-bxctl")
def config_bxctl(data: bytes) -> None:
    try:
        parse_toml(data, BxctlFile)
    except TomlFileError:
        return


@target("state")
def state(data: bytes) -> None:
    for head in (None, 0, 2**63):
        parsed = parse_state(data, head_seq=head)
        assert (parsed.problem is None) or parsed.taint.label == "secret"


@target("conversation-line")
def conversation_line(data: bytes) -> None:
    try:
        message = decode(data, Message)
    except DecodeError:
        return
    assert decode(encode(message, Message), Message) == message


# -- the audit log -------------------------------------------------------------


@target("audit-line")
def audit_line(data: bytes) -> None:
    try:
        record = parse_record(data)
    except DecodeError as exc:
        strict_error: DecodeError | None = exc
    else:
        strict_error = None
    try:
        facts = check_record_line(data)
    except DecodeError:
        assert strict_error is not None, "the fast scan refuses a line the parser accepts"
        return
    assert strict_error is None, "the fast scan accepts a line the parser refuses"
    assert facts.seq == record.seq and facts.prev == record.prev
    assert facts.key == event_key(record.event)
    assert encode_record(record) == data.rstrip(b"\n"), "a record line has one form"


@target("chain")
def chain(data: bytes) -> None:
    verifier = ChainVerifier()
    for number, content in enumerate(data.split(FILE_BREAK)):
        if not verifier.begin_file(f"2026-11-{number % 30 + 1:02d}.jsonl"):
            continue
        for line in content.splitlines(keepends=True):
            verifier.feed_line(line)
        verifier.end_file()
        if number >= 29:
            break
    report = verifier.finish()
    json.dumps(report_json(report))
    assert report.ok == (not report.unaccepted), "ok and the failures disagree"


# -- tools -----------------------------------------------------------------------


@target("toolkit-request")
def toolkit_request(data: bytes) -> None:
    try:
        parse_toolkit_request(data)
    except ToolError as exc:
        assert exc.code == "bad_request"


@target("tool-args")
def tool_args(data: bytes) -> None:
    """`{"tool": name, "args": {...}}`: brokerd's decoder of each tool's arguments."""
    try:
        document = loads_object(data)
    except DecodeError:
        return
    tool, args = document.get("tool"), document.get("args")
    if tool not in CATALOGUE or not isinstance(args, dict):
        return
    try:
        parsed = parse_args(tool, args)
    except ArgsError:
        return
    assert parse_args(tool, parsed.as_json()) == parsed, "parsed arguments do not re-parse"


SEALED = Seal(host="docs.python.org", port=443, addresses=())  # no address: never connects
_REPLIES = {b"\x05\xff", b"\x05\x00"} | {bytes([5, c, 0, 1, 0, 0, 0, 0, 0, 0]) for c in range(9)}


@target("socks5")
def socks5(data: bytes) -> None:
    """The egress proxy's SOCKS5 negotiation, over a memory stream."""
    proxy = EgressProxy(SEALED)
    answers: list[bytes] = []

    async def main() -> None:
        client, server = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(proxy._handle, server)
            try:
                for chunk in pieces(data):
                    await client.send_all(chunk)
                await client.send_eof()
            except trio.BrokenResourceError:
                pass  # the proxy hung up before reading it all: the container sees EPIPE
            while answer := await client.receive_some(4096):
                answers.append(answer)

    trio.run(main)
    reply = b"".join(answers)
    assert reply in {b""} | _REPLIES | {b"\x05\x00" + r for r in _REPLIES}, reply
    if proxy.used:
        assert b"docs.python.org" in data, "a CONNECT to another host went through"


# A target that always finds its crash: the test that proves crashes are caught.
@target("selftest-crash")
def selftest_crash(data: bytes) -> None:
    if data[:1] == b"!":
        raise RuntimeError("selftest-crash: found the planted crash")


REAL_TARGETS = sorted(name for name in TARGETS if not name.startswith("selftest"))

if __name__ == "__main__":  # pragma: no cover
    print("\n".join(REAL_TARGETS), file=sys.stdout)
