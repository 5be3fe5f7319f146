"""The thin trio adapter around the sans-IO framing of `boxmaker.proto`."""

from __future__ import annotations

import trio

from ..proto import FrameDecoder, encode_frame

_RECEIVE_CHUNK = 65536


async def receive_frame(stream: trio.abc.ReceiveStream, decoder: FrameDecoder) -> bytes | None:
    """The next frame body, or None when the peer closed cleanly between frames.

    Raises FrameError for a bad header (before reading the body) and
    trio.BrokenResourceError if the peer closes inside a frame.
    """
    while True:
        body = decoder.next_frame()
        if body is not None:
            return body
        data = await stream.receive_some(min(_RECEIVE_CHUNK, max(decoder.wanted, 4096)))
        if not data:
            if decoder.buffered:
                raise trio.BrokenResourceError("the peer closed the connection inside a frame")
            return None
        decoder.feed(data)


async def send_frame(stream: trio.abc.SendStream, body: bytes) -> None:
    await stream.send_all(encode_frame(body))
