"""Length-prefixed frames (boxmaker.proto._framing), sans-IO."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._errors import DecodeError, FrameError
from boxmaker.proto._framing import HEADER, MAX_FRAME, FrameDecoder, encode_frame

BODIES = [b'{"v":1,"id":1,"status":{}}', b"{}", b'{"id":2,"ok":{}}', b"x" * 300]


def _all_frames(decoder: FrameDecoder) -> list[bytes]:
    frames = []
    while (body := decoder.next_frame()) is not None:
        frames.append(body)
    return frames


def test_encode_frame() -> None:
    assert encode_frame(b"{}") == b"\x00\x00\x00\x02{}"
    assert HEADER.size == 4
    assert MAX_FRAME == 8 * 1024 * 1024 == 8_388_608


def test_encode_refuses_out_of_range_bodies() -> None:
    with pytest.raises(ValueError):
        encode_frame(b"")
    with pytest.raises(ValueError):
        encode_frame(b"x" * (MAX_FRAME + 1))
    assert len(encode_frame(b"x" * MAX_FRAME)) == MAX_FRAME + 4


def test_one_frame_in_one_piece() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b'{"a":1}'))
    assert decoder.next_frame() == b'{"a":1}'
    assert decoder.next_frame() is None
    assert decoder.buffered == 0


def test_wanted_counts_down_to_the_end_of_the_frame() -> None:
    decoder = FrameDecoder()
    assert decoder.wanted == 4
    decoder.feed(b"\x00\x00")
    assert decoder.wanted == 2
    decoder.feed(b"\x00\x05")
    assert decoder.wanted == 5
    decoder.feed(b"{}")
    assert decoder.wanted == 3
    assert decoder.next_frame() is None
    decoder.feed(b"   ")
    assert decoder.next_frame() == b"{}   "
    assert decoder.wanted == 4


def test_several_frames_in_one_feed() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"".join(encode_frame(b) for b in BODIES))
    assert _all_frames(decoder) == BODIES


@settings(max_examples=150)
@given(
    bodies=st.lists(st.binary(min_size=1, max_size=600), min_size=1, max_size=6),
    data=st.data(),
)
def test_arbitrary_splits_decode_identically(bodies: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(b) for b in bodies)
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=20)))
    decoder = FrameDecoder()
    received: list[bytes] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        decoder.feed(stream[start:cut])
        start = cut
        received.extend(_all_frames(decoder))
    assert received == bodies
    assert decoder.buffered == 0


@settings(max_examples=50)
@given(st.lists(st.binary(min_size=1, max_size=100), min_size=1, max_size=5))
def test_byte_by_byte(bodies: list[bytes]) -> None:
    stream = b"".join(encode_frame(b) for b in bodies)
    decoder = FrameDecoder()
    received: list[bytes] = []
    for index in range(len(stream)):
        decoder.feed(stream[index : index + 1])
        received.extend(_all_frames(decoder))
    assert received == bodies


def test_length_zero_is_refused_from_the_header() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match="length 0"):
        decoder.feed(b"\x00\x00\x00\x00")


@pytest.mark.parametrize("length", [MAX_FRAME + 1, 2**31, 2**32 - 1])
def test_oversize_length_is_refused_from_the_header_alone(length: int) -> None:
    decoder = FrameDecoder()
    header = struct.pack(">I", length)
    decoder.feed(header[:3])  # not yet: three bytes do not say anything
    with pytest.raises(FrameError, match="exceeds the limit"):
        decoder.feed(header[3:])


def test_oversize_length_in_one_feed_with_some_body() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">I", MAX_FRAME + 1) + b"{")


def test_largest_frame_is_accepted() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", MAX_FRAME))
    assert decoder.wanted == MAX_FRAME
    decoder.feed(b"x" * MAX_FRAME)
    body = decoder.next_frame()
    assert body is not None and len(body) == MAX_FRAME


def test_a_bad_second_header_is_refused_once_the_frame_before_it_is_taken() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"{}") + b"\xff\xff")
    decoder.feed(b"\xff\xff")
    assert decoder.next_frame() == b"{}"
    with pytest.raises(FrameError, match="exceeds the limit"):
        decoder.next_frame()


def test_a_bad_header_behind_a_complete_frame_does_not_lose_the_frame() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"{}") + b"\x00\x00\x00\x00")
    assert decoder.next_frame() == b"{}"
    with pytest.raises(FrameError, match="length 0"):
        decoder.next_frame()


def test_a_bad_header_alone_is_refused_by_feed() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match="length 0"):
        decoder.feed(b"\x00\x00\x00\x00{}")


def test_smaller_limit() -> None:
    decoder = FrameDecoder(max_frame=10)
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">I", 11))
    small = FrameDecoder(max_frame=10)
    small.feed(encode_frame(b"0123456789"))
    assert small.next_frame() == b"0123456789"


@pytest.mark.parametrize(
    "garbage",
    [b"GET / HTTP/1.1\r\n\r\n", b'{"v":1}', b"\xff\xff\xff\xff", b"\x80\x00\x00\x00"],
)
def test_garbage_is_refused_from_its_first_four_bytes(garbage: bytes) -> None:
    """Text where a header belongs reads as an absurd length: refused at once."""
    decoder = FrameDecoder()
    with pytest.raises(FrameError):
        decoder.feed(garbage)


def test_truncated_frame_waits_and_says_so() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b'{"a":1}')[:-1])
    assert decoder.next_frame() is None
    assert decoder.buffered == 10
    assert decoder.wanted == 1


def test_frame_error_is_a_decode_error() -> None:
    assert issubclass(FrameError, DecodeError)
