"""The chunked body decoded with its events (`_sse_chunked`) against the two stages it
stands for (`ChunkedDecoder` then `SSEParser`): the same events at the same feed, the
same refusals, on llama-server's captures and on bodies near and far from its form."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker._http._chunked import ChunkedDecoder, ChunkedError
from boxmaker._http._sse import SSEError, SSEParser
from boxmaker._http._sse_chunked import ChunkedEvents, Item, items_of
from tests.fakes.llama_server import FIXTURES, capture_body
from tests.http.test_sse import split_at

STREAM_CAPTURES = sorted(p.name for p in FIXTURES.glob("chat-stream-*.http"))
Run = tuple[list[list[Item]], str | None]


def two_stages(reads: list[bytes], max_event_bytes: int = 16 * 1024 * 1024) -> Run:
    """The simple path: every read through the decoder, its body through the parser."""
    decoder, parser = ChunkedDecoder(), SSEParser(max_event_bytes=max_event_bytes)
    out: list[list[Item]] = []
    try:
        for raw in reads:
            out.append(items_of(parser.feed(decoder.feed(raw))))
    except (ChunkedError, SSEError) as exc:
        return out, type(exc).__name__
    return out, "done" if decoder.done else None


def fused(reads: list[bytes], max_event_bytes: int = 16 * 1024 * 1024) -> Run:
    events = ChunkedEvents(SSEParser(max_event_bytes=max_event_bytes))
    out: list[list[Item]] = []
    try:
        for raw in reads:
            got = events.feed(raw)
            if events.plain:  # the hint is never wrong
                assert all(type(i) is str and i != "[DONE]" and not i.startswith('{"error"')
                           for i in got)
            out.append(got)
    except (ChunkedError, SSEError) as exc:
        return out, type(exc).__name__
    return out, "done" if events.done else None


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def llama_body(n: int) -> bytes:
    events = [b'data: {"choices":[{"delta":{"content":"t\xc3\xb6k %d"}}]}\n\n' % i
              if i % 3 else b'data: {"choices":[{"delta":{"content":"tok %d"}}]}\n\n' % i
              for i in range(n)]
    return b"".join(map(chunk, events)) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def test_the_fast_path_takes_llama_servers_form() -> None:
    body = llama_body(500)
    events = ChunkedEvents()
    got = [item for i in range(0, len(body), 4096) for item in events.feed(body[i : i + 4096])]
    assert events.done and got[-1] == "[DONE]" and len(got) == 501
    assert events.fast_events > 400
    assert two_stages([body]) == fused([body])


@pytest.mark.parametrize("name", STREAM_CAPTURES)
@pytest.mark.parametrize("size", [1, 7, 100, 4096])
def test_captures_cut_into_reads(name: str, size: int) -> None:
    raw = b"".join(map(chunk, [capture_body(name)[i : i + 300]
                               for i in range(0, len(capture_body(name)), 300)])) + b"0\r\n\r\n"
    reads = [raw[i : i + size] for i in range(0, len(raw), size)]
    assert fused(reads) == two_stages(reads)


@pytest.mark.parametrize("size", [4096, 8192, 16 * 1024 * 1024])
def test_the_event_limit_holds_on_the_fast_path(size: int) -> None:
    big = chunk(b"data: " + b"x" * 5000 + b"\n\n") * 3
    assert fused([big], size) == two_stages([big], size)


def test_an_event_is_not_held_once_its_blank_line_came() -> None:
    # the read ends between the event's blank line and the chunk's CRLF
    one = chunk(b"data: a\n\n")
    reads = [one + one[:-2], one[-2:] + one]
    assert fused(reads) == two_stages(reads)
    assert fused(reads)[0][0] == ["a", "a"]


# pieces of a chunked body of events: well framed chunks (mostly llama's form) and
# damage of every kind, cut anywhere
PAYLOADS = [b"data: x\n\n", b'data: {"a":1}\n\n', b"data: [DONE]\n\n", b'data: {"error":1}\n\n',
            b"data: t\xc3\xb6k\n\n", b"data: \xc3\n\n", b"\xc3\xb6data: y\n\n", b": ping\n\n",
            b"data: a\r\n\r\n", b"data: a\rb\n\n", b"data: a\nb\n\n", b"data:x\n\n",
            b"data: x\n", b"\n\n", b"data: x", b"event: e\ndata: x\n\n", b"\xef\xbb\xbfdata: b\n\n",
            b"data:  sp\n\n", b"error: {}\n\n"]


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    parts = []
    for payload in draw(st.lists(st.sampled_from(PAYLOADS), max_size=12)):
        how = draw(st.sampled_from(["ok"] * 6 + ["upper", "zeros", "ext", "more", "less",
                                                 "no-crlf", "split"]))
        size = len(payload)
        if how == "upper":
            parts.append(b"%X\r\n%s\r\n" % (size, payload))
        elif how == "zeros":
            parts.append(b"0%x\r\n%s\r\n" % (size, payload))
        elif how == "ext":
            parts.append(b"%x;e=1\r\n%s\r\n" % (size, payload))
        elif how in ("more", "less"):
            parts.append(b"%x\r\n%s\r\n" % (size + (1 if how == "more" else -1), payload))
        elif how == "no-crlf":
            parts.append(b"%x\r\n%s" % (size, payload))
        elif how == "split" and size > 2:
            parts.append(chunk(payload[:2]) + chunk(payload[2:]))
        else:
            parts.append(chunk(payload))
    if draw(st.booleans()):
        parts.append(b"0\r\n\r\n")
    return b"".join(parts)


@settings(max_examples=400, deadline=None)
@given(body=bodies(), cuts=st.lists(st.integers(1, 400), max_size=8))
def test_the_same_as_the_two_stages_on_any_body_cut_anywhere(body: bytes, cuts: list[int]) -> None:
    reads = split_at(body, cuts)
    assert fused(reads) == two_stages(reads)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200), cuts=st.lists(st.integers(1, 200), max_size=6))
def test_the_same_on_random_bytes(raw: bytes, cuts: list[int]) -> None:
    reads = split_at(raw, cuts)
    assert fused(reads) == two_stages(reads)
