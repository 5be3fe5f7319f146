"""The chunked-body decoder, with h11 as the oracle."""

from __future__ import annotations

from pathlib import Path

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker._http._chunked import ChunkedDecoder, ChunkedError
from tests.conftest import examples
from tests.fakes.llama_server import FIXTURES, capture_body

CHUNKED_CAPTURES = sorted(p for p in FIXTURES.glob("*.http")
                          if b"Transfer-Encoding: chunked" in p.read_bytes())
HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def h11_outcome(body: bytes) -> tuple[bytes, bool, bool]:
    """(payload, complete, refused) as h11 sees `body` after HEAD."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(HEAD + body)
    payload = b""
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Data):
                payload += event.data
            elif isinstance(event, h11.EndOfMessage):
                return payload, True, False
            elif event is h11.NEED_DATA:
                return payload, False, False
    except h11.RemoteProtocolError:
        return payload, False, True


def ours(pieces: list[bytes]) -> tuple[bytes, bool, bool]:
    decoder = ChunkedDecoder()
    payload = b""
    try:
        for piece in pieces:
            payload += decoder.feed(piece)
            if decoder.done:
                return payload, True, False
    except ChunkedError:
        return payload, False, True
    return payload, decoder.done, False


def body_of_capture(path: Path) -> bytes:
    raw = path.read_bytes()
    return raw.split(b"\r\n\r\n", 1)[1]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return pieces


@pytest.mark.parametrize("path", CHUNKED_CAPTURES, ids=lambda p: p.name)
def test_captures_at_every_split(path: Path) -> None:
    body = body_of_capture(path)
    expected = capture_body(path.name)
    assert ours([body]) == (expected, True, False)
    for cut in range(1, len(body)):
        assert ours([body[:cut], body[cut:]]) == (expected, True, False), cut


def test_byte_by_byte_returns_data_as_soon_as_it_is_there() -> None:
    decoder = ChunkedDecoder()
    body = b"5\r\nhello\r\n0\r\n\r\n"
    got = [decoder.feed(body[i : i + 1]) for i in range(len(body))]
    assert got[3:8] == [b"h", b"e", b"l", b"l", b"o"]
    assert b"".join(got) == b"hello" and decoder.done


def test_extensions_whitespace_and_trailers() -> None:
    body = b"5;name=value\r\nhello\r\n6  \r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    assert ours([body]) == h11_outcome(body) == (b"hello world", True, False)


@pytest.mark.parametrize("body", [
    b"5\r\nhelloXX0\r\n\r\n",       # no CRLF after the data
    b"zz\r\nhello\r\n",            # not hex
    b" 5\r\nhello\r\n",            # leading space
    b"5\nhello\r\n",               # bare LF
    b"123456789012345678901\r\n",  # 21 hex digits
    b"0\r\nno colon\r\n\r\n",      # a trailer that is not a field
])
def test_refused_like_h11(body: bytes) -> None:
    assert ours([body])[2] is True
    assert h11_outcome(body)[2] is True


def test_data_after_the_end_is_refused() -> None:
    decoder = ChunkedDecoder()
    assert decoder.feed(b"0\r\n\r\n") == b"" and decoder.done
    with pytest.raises(ChunkedError):
        decoder.feed(b"5\r\n")


def test_long_size_line_refused_without_waiting_forever() -> None:
    decoder = ChunkedDecoder()
    with pytest.raises(ChunkedError):
        for _ in range(100):
            decoder.feed(b"0" * 100)


@st.composite
def chunked_bodies(draw: st.DrawFn) -> tuple[bytes, bytes]:
    payloads = draw(st.lists(st.binary(min_size=1, max_size=40), max_size=8))
    out = b""
    for p in payloads:
        ext = draw(st.sampled_from([b"", b";a", b";a=b", b"  ", b"\t"]))
        size = draw(st.sampled_from(["%x", "%X", "%04x"])) % len(p)
        out += size.encode() + ext + b"\r\n" + p + b"\r\n"
    out += b"0\r\n" + draw(st.sampled_from([b"", b"T: 1\r\n"])) + b"\r\n"
    return out, b"".join(payloads)


@settings(max_examples=examples(200), deadline=None)
@given(case=chunked_bodies(), cuts=st.lists(st.integers(1, 400), max_size=12))
def test_random_bodies_any_split_match_h11(case: tuple[bytes, bytes], cuts: list[int]) -> None:
    body, payload = case
    assert h11_outcome(body) == (payload, True, False)
    assert ours(split_at(body, cuts)) == (payload, True, False)


TOKENS = [b"\r\n", b"\r", b"\n", b"0", b"1", b"5", b"a", b"F", b";", b"=", b" ", b"\t",
          b"x", b":", b"\xff", b"hello"]


@settings(max_examples=examples(300), deadline=None)
@given(tokens=st.lists(st.sampled_from(TOKENS), max_size=40),
       cuts=st.lists(st.integers(1, 200), max_size=6))
def test_garbage_same_verdict_as_h11(tokens: list[bytes], cuts: list[int]) -> None:
    body = b"".join(tokens)
    mine = ours(split_at(body, cuts))
    theirs = h11_outcome(body)
    # a body is complete for both or for neither, with the same payload; an input
    # one side refuses the other may still be waiting on (trailer leniency differs)
    assert mine[1] == theirs[1]
    if mine[1] or not (mine[2] or theirs[2]):
        assert mine[0] == theirs[0]


@pytest.mark.parametrize("body", [
    b"0\r\n:\r\n\r\n", b"0\r\na :b\r\n\r\n", b"0\r\n\t:x\r\n\r\n", b"0\r\na;b:c\r\n\r\n",
    b"0\r\na:b\x00\r\n\r\n", b"0\r\na:b\x0bc\r\n\r\n", b"0\r\na:b\rc\r\n\r\n",
    b"0\r\na:b\r\n c\r\n\r\n", b"0\r\na:\xff\r\n\r\n", b"0\r\na:b c \r\n\r\n", b"0\r\na:\r\n\r\n",
])
def test_a_trailer_field_is_read_as_h11_reads_a_header_field(body: bytes) -> None:
    # hypothesis found `0 CRLF : CRLF CRLF` complete for us and refused by h11: a
    # trailer line is a whole header field (token name, value of visible bytes), and
    # an obsolete fold joins the line before it
    assert ours([body])[1] == h11_outcome(body)[1]
    assert ours([body[:5], body[5:]])[1] == h11_outcome(body)[1]


@pytest.mark.parametrize("size_line", [b"%x", b"%X", b"0%x", b"%020x", b"%021x", b"%x;ext=1",
                                       b"%x \t"])
@pytest.mark.parametrize("length", [1, 9, 10, 255, 2048, 2049, 70_000])
def test_every_way_of_writing_a_size_matches_h11(size_line: bytes, length: int) -> None:
    # the fast path takes canonical sizes by table (up to 2,048), by formatting, or
    # by parsing; any other way of writing one goes the long way, with h11's verdict
    data = (b"d" * (length - 1)) + b"\n"
    chunk = size_line % length + b"\r\n" + data + b"\r\n"
    body = chunk * 3 + b"0\r\n\r\n"
    assert ours([body]) == h11_outcome(body)
    assert ours([chunk * 2, chunk + b"0\r\n\r\n"]) == h11_outcome(body)
