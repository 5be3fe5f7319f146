"""Length-prefixed frames (02-wire "Framing"), sans-IO.

A frame is a 4-byte unsigned big-endian length N, then N bytes of UTF-8 JSON
holding one object, with 1 <= N <= 8 MiB.  `FrameDecoder` is fed bytes and
hands out complete frame bodies; an announced length out of range is refused
as soon as the 4 header bytes are there, before any of the body is read (behind
a complete frame: once that frame has been taken).
"""

from __future__ import annotations

import struct

from ._errors import FrameError

MAX_FRAME = 8 * 1024 * 1024
HEADER = struct.Struct(">I")


def encode_frame(body: bytes) -> bytes:
    """Header plus body.  An out-of-range body is our own bug."""
    if not 1 <= len(body) <= MAX_FRAME:
        raise ValueError(f"frame body of {len(body)} bytes is outside 1..{MAX_FRAME}")
    return HEADER.pack(len(body)) + body


class FrameDecoder:
    """Feed bytes with `feed`, take complete bodies with `next_frame`."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._max = max_frame
        self._need: int | None = None

    def feed(self, data: bytes | bytearray) -> None:
        self._buffer += data
        self._check_header()

    def _check_header(self) -> None:
        if self._need is None and len(self._buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buffer)
            if length == 0:
                raise FrameError("frame length 0; expected 1 or more")
            if length > self._max:
                raise FrameError(f"frame length {length} exceeds the limit of {self._max} bytes")
            self._need = length

    def next_frame(self) -> bytes | None:
        """The next complete body, or None if more bytes are needed.

        A bad header behind a complete frame is refused by the call after the one that
        hands out that frame: a frame that arrived whole is never lost to the bytes
        that follow it."""
        self._check_header()
        if self._need is None or len(self._buffer) < HEADER.size + self._need:
            return None
        end = HEADER.size + self._need
        body = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        self._need = None
        return body

    @property
    def wanted(self) -> int:
        """How many more bytes complete the current header or frame (at least 1)."""
        if self._need is None:
            return max(1, HEADER.size - len(self._buffer))
        return max(1, HEADER.size + self._need - len(self._buffer))

    @property
    def buffered(self) -> int:
        return len(self._buffer)
