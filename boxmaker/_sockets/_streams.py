"""The thin trio adapter around the sans-IO framing of `boxmaker.proto`."""

from __future__ import annotations

import errno
import os

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


async def send_frame_direct(stream: trio.SocketStream, body: bytes) -> None:
    """`send_frame` without trio's pass of the scheduler when the socket takes the
    frame at once.

    trio's `send_all` yields after each send that succeeded (its checkpoint): the
    task runs once more, in the next batch of the run loop, and the loop polls the
    kernel once more (an `epoll_wait`) before it.  A task that writes one frame per
    event and then waits for its next event (loopd's writer of a turn's events) pays
    that per event.  Here the frame is written with one non-blocking write; only a
    full socket buffer waits for the socket to be writable.  No checkpoint when the
    write was taken at once: the caller's next await must be one (the writer's next
    receive from its channel is).  Errors as `send_all`'s: a closed stream
    `trio.ClosedResourceError`, a broken one `trio.BrokenResourceError`.
    """
    data = memoryview(encode_frame(body))
    while data:
        fd = stream.socket.fileno()
        if fd == -1:
            raise trio.ClosedResourceError("the socket was closed")
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(stream.socket)
            continue
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("the socket was closed") from exc
            raise trio.BrokenResourceError(f"the socket is broken: {exc}") from exc
        data = data[sent:]
