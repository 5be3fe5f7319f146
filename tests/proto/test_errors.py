"""boxmaker/proto/_errors.py: the protocol layer's errors are always the peer's fault."""

from __future__ import annotations

import attrs
import pytest

from boxmaker._errors import PeerError
from boxmaker.proto._convert import decode
from boxmaker.proto._errors import DecodeError, FrameError, ProtoError
from boxmaker.proto._framing import FrameDecoder
from boxmaker.proto._json import loads_object


@attrs.frozen(kw_only=True)
class Inner:
    count: int


@attrs.frozen(kw_only=True)
class Outer:
    inner: Inner


def test_a_decode_error_keeps_its_message_and_its_path() -> None:
    error = DecodeError("expected an integer", path="$.call.args")
    assert (error.message, error.path) == ("expected an integer", "$.call.args")
    assert str(error) == "$.call.args: expected an integer"
    bare = DecodeError("bad JSON")
    assert (bare.path, str(bare)) == (None, "bad JSON")


def test_the_errors_are_the_peers_fault() -> None:
    assert issubclass(FrameError, DecodeError) and issubclass(DecodeError, ProtoError)
    assert issubclass(ProtoError, PeerError)


def test_bad_json_from_a_peer_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="duplicate key"):
        loads_object(b'{"a": 1, "a": 2}')


def test_a_schema_error_names_where_in_the_document_it_is() -> None:
    with pytest.raises(DecodeError) as caught:
        decode(b'{"inner": {"count": "seven"}}', Outer)
    assert caught.value.path is not None and "inner" in caught.value.path
    assert str(caught.value).startswith(f"{caught.value.path}: ")


def test_a_frame_of_length_zero_is_a_frame_error() -> None:
    decoder = FrameDecoder(max_frame=16)
    with pytest.raises(FrameError, match="frame length 0") as caught:
        decoder.feed(b"\x00\x00\x00\x00")
    assert caught.value.path is None
    with pytest.raises(FrameError, match="exceeds the limit of 16 bytes"):
        FrameDecoder(max_frame=16).feed(b"\x00\x00\x00\x11")
