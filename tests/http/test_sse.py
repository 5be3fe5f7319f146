"""The sans-IO SSE parser against the real captures, every split, and garbage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker._http._sse import SSEError, SSEEvent, SSEParser
from tests.conftest import examples
from tests.fakes.llama_server import FIXTURES
from tests.fakes.llama_server import capture_body as _capture_body

STREAM_CAPTURES = sorted(FIXTURES.glob("chat-stream-*.http"))


def capture_body(path: Path) -> bytes:
    return _capture_body(path.name)


# -- an independent, naive oracle: decode everything, split lines with a regex --


def oracle(stream: bytes) -> list[SSEEvent]:
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)
    lines.pop()  # the last piece is not terminated: not a line
    events: list[SSEEvent] = []
    data: list[str] = []
    fields: dict[str, object] = {}
    extra: list[tuple[str, str]] = []
    for line in lines:
        if line == "":
            if data or fields or extra:
                events.append(
                    SSEEvent(
                        data="\n".join(data) if data else None,
                        event=fields.get("event"),  # type: ignore[arg-type]
                        id=fields.get("id"),  # type: ignore[arg-type]
                        retry=fields.get("retry"),  # type: ignore[arg-type]
                        fields=tuple(extra),
                    )
                )
            data, fields, extra = [], {}, []
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            fields["event"] = value
        elif name == "id":
            if "\0" not in value:
                fields["id"] = value
        elif name == "retry":
            if re.fullmatch(r"[0-9]+", value):
                fields["retry"] = int(value)
        else:
            extra.append((name, value))
    return events


def feed_all(pieces: list[bytes]) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    return events


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return pieces


# -- the real captures ---------------------------------------------------------


@pytest.mark.parametrize("path", STREAM_CAPTURES, ids=lambda p: p.name)
def test_capture_whole(path: Path) -> None:
    body = capture_body(path)
    events = feed_all([body])
    assert events == oracle(body)
    assert len(events) == body.count(b"\n\n")
    assert all(e.data is not None and e.fields == () for e in events)
    if "error" in path.name:
        assert events[-1].data is not None and events[-1].data.startswith('{"error"')
    else:
        assert events[-1].data == "[DONE]"


@pytest.mark.parametrize("path", STREAM_CAPTURES, ids=lambda p: p.name)
def test_capture_split_at_every_byte(path: Path) -> None:
    body = capture_body(path)
    expected = oracle(body)
    for cut in range(1, len(body)):
        assert feed_all([body[:cut], body[cut:]]) == expected, cut


@pytest.mark.parametrize("path", STREAM_CAPTURES, ids=lambda p: p.name)
def test_capture_byte_by_byte_delivers_each_event_at_its_blank_line(path: Path) -> None:
    body = capture_body(path)
    parser = SSEParser()
    ends = {m.end() for m in re.finditer(rb"\n\n", body)}
    count = 0
    for i in range(len(body)):
        got = parser.feed(body[i : i + 1])
        assert len(got) == (1 if i + 1 in ends else 0), i
        count += len(got)
    assert count == len(ends)
    assert not parser.close()


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
@pytest.mark.parametrize("path", STREAM_CAPTURES, ids=lambda p: p.name)
def test_capture_with_other_line_ends(path: Path, ending: bytes) -> None:
    body = capture_body(path)
    converted = body.replace(b"\n", ending)
    expected = oracle(body)
    assert feed_all([converted]) == expected
    for cut in range(1, len(converted), 7):
        assert feed_all([converted[:cut], converted[cut:]]) == expected, cut


@settings(max_examples=examples(200), deadline=None)
@given(
    path=st.sampled_from(STREAM_CAPTURES),
    cuts=st.lists(st.integers(min_value=1, max_value=12000), max_size=40),
    ending=st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_capture_random_multi_splits(path: Path, cuts: list[int], ending: bytes) -> None:
    body = capture_body(path).replace(b"\n", ending)
    assert feed_all(split_at(body, cuts)) == oracle(body)


# -- the rules one by one ---------------------------------------------------------


def test_cr_at_chunk_end_then_lf_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []  # the LF completes the CRLF: not a blank line
    assert parser.feed(b"\r") == [SSEEvent(data="a")]  # a CR alone is a line end at once
    assert parser.feed(b"\ndata: b\n\n") == [SSEEvent(data="b")]


def test_data_lines_joined_and_one_space_stripped() -> None:
    events = feed_all([b"data:a\ndata:  b\ndata\ndata: \n\n"])
    assert events == [SSEEvent(data="a\n b\n\n")]


def test_empty_data_line_dispatches_empty_string() -> None:
    assert feed_all([b"data\n\n"]) == [SSEEvent(data="")]


def test_comments_counted_not_dispatched() -> None:
    parser = SSEParser()
    assert parser.feed(b":\n\n: ping\n\n") == []
    assert parser.comments == 2
    assert parser.feed(b"data: x\n:mid\n\n") == [SSEEvent(data="x")]
    assert parser.comments == 3


def test_other_fields_handed_up() -> None:
    stream = b'event: message\nid: 7\nretry: 100\nerror: {"code": 500}\nfoo\n\n'
    [event] = feed_all([stream])
    assert event.data is None
    assert (event.event, event.id, event.retry) == ("message", "7", 100)
    assert event.fields == (("error", '{"code": 500}'), ("foo", ""))
    assert event.field("error") == '{"code": 500}'
    assert event.field("nope") is None


def test_bad_id_and_retry_ignored() -> None:
    assert feed_all([b"id: a\0b\nretry: 1x\n\n"]) == []
    assert feed_all([b"id: a\0b\ndata: d\n\n"]) == [SSEEvent(data="d")]


def test_bom_stripped_only_at_start_even_split() -> None:
    bom = "\ufeff".encode()
    stream = bom + b"data: a\n\n" + bom + b"data: b\n\n"
    # a BOM later on is part of a field name "\ufeffdata": an unknown field
    expected = [SSEEvent(data="a"), SSEEvent(data=None, fields=(("\ufeffdata", "b"),))]
    for cut in range(len(stream)):
        assert feed_all([stream[:cut], stream[cut:]]) == expected, cut


def test_utf8_split_inside_a_sequence_and_invalid_bytes_replaced() -> None:
    stream = "data: grüße 🎉\n\n".encode()
    for cut in range(1, len(stream)):
        assert feed_all([stream[:cut], stream[cut:]]) == [SSEEvent(data="grüße 🎉")]
    assert feed_all([b"data: \xff\xfeok\n\n"]) == [SSEEvent(data="\ufffd\ufffdok")]


def test_incomplete_event_at_close_is_reported_not_dispatched() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: half\n") == []
    assert parser.close() is True
    parser = SSEParser()
    assert parser.feed(b"data: x\n\n") == [SSEEvent(data="x")]
    assert parser.close() is False


def test_limits() -> None:
    parser = SSEParser(max_event_bytes=100)
    with pytest.raises(SSEError):
        parser.feed(b"data: " + b"x" * 200)
    parser = SSEParser(max_event_bytes=100)
    with pytest.raises(SSEError):
        for _ in range(30):
            parser.feed(b"data: 0123456789\n")


# -- garbage --------------------------------------------------------------------

GARBAGE_ALPHABET = [b"\n", b"\r", b"\r\n", b":", b" ", b"data", b"event", b"id", b"retry",
                    b"error", b"x", b"7", b"\xff", b"\xc3", b"\xa9", b"\xef\xbb\xbf", b"\0"]


@settings(max_examples=examples(300), deadline=None)
@given(
    tokens=st.lists(st.sampled_from(GARBAGE_ALPHABET), max_size=80),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=10),
)
def test_garbage_never_drops_or_invents(tokens: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(tokens)
    assert feed_all(split_at(stream, cuts)) == oracle(stream)


@settings(max_examples=examples(200), deadline=None)
@given(stream=st.binary(max_size=300), cuts=st.lists(st.integers(1, 300), max_size=8))
def test_random_bytes_never_drops_or_invents(stream: bytes, cuts: list[int]) -> None:
    assert feed_all(split_at(stream, cuts)) == oracle(stream)


def test_blank_line_at_the_start_of_a_chunk_ends_the_open_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\n") == []
    assert parser.feed(b"\ndata: y\n\n") == [SSEEvent(data="x"), SSEEvent(data="y")]
    assert parser.feed(b"data: z\n") == []
    assert parser.feed(b"\n") == [SSEEvent(data="z")]
    assert parser.feed(b"data: a\ndata: b\n\n\n\nevent: e\n\n") == [
        SSEEvent(data="a\nb"), SSEEvent(data=None, event="e")]


FAST_ALPHABET = [b"data: ", b"data: x", b"\n\n", b"\n", b"\r\n", b"x", b"data: [DONE]",
                 b'{"error"', b": ping", b"data:", b"\n\ndata: ", b"event: e"]


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.sampled_from(FAST_ALPHABET), max_size=60),
    cuts=st.lists(st.integers(min_value=1, max_value=300), max_size=6),
)
def test_near_the_fast_path_never_drops_or_invents(tokens: list[bytes], cuts: list[int]) -> None:
    # shapes close to llama-server's (one data line per event), where the fast path
    # takes a whole read at once or must step aside for the line-by-line one
    stream = b"".join(tokens)
    assert feed_all(split_at(stream, cuts)) == oracle(stream)


@pytest.mark.parametrize("size", [11, 12, 13, 22, 23, 24])
def test_the_fast_path_keeps_the_event_limit(size: int) -> None:
    stream = b"data: aaaa\n\ndata: bbbb\n\n"  # 12 bytes per event, 24 in all
    whole = SSEParser(max_event_bytes=size)
    bytewise = SSEParser(max_event_bytes=size)

    def run(parser: SSEParser, pieces: list[bytes]) -> list[SSEEvent] | str:
        try:
            return [event for piece in pieces for event in parser.feed(piece)]
        except SSEError:
            return "refused"

    assert run(whole, [stream]) in (run(bytewise, [bytes([b]) for b in stream]), "refused")
