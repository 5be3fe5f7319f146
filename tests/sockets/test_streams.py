"""The trio adapter around framing (boxmaker._sockets._streams)."""

from __future__ import annotations

import socket
import struct

import pytest
import trio
import trio.testing

from boxmaker._sockets._streams import receive_frame, send_frame, send_frame_direct
from boxmaker.proto._errors import FrameError
from boxmaker.proto._framing import MAX_FRAME, FrameDecoder, encode_frame


async def test_send_then_receive_over_memory_streams() -> None:
    client, server = trio.testing.memory_stream_pair()
    decoder = FrameDecoder()
    with trio.fail_after(5):
        await send_frame(client, b'{"v":1,"id":1,"status":{}}')
        await send_frame(client, b'{"v":1,"id":2,"status":{}}')
        assert await receive_frame(server, decoder) == b'{"v":1,"id":1,"status":{}}'
        assert await receive_frame(server, decoder) == b'{"v":1,"id":2,"status":{}}'


async def test_clean_close_between_frames_is_none() -> None:
    client, server = trio.testing.memory_stream_pair()
    decoder = FrameDecoder()
    with trio.fail_after(5):
        await send_frame(client, b"{}")
        await client.aclose()
        assert await receive_frame(server, decoder) == b"{}"
        assert await receive_frame(server, decoder) is None


async def test_close_with_nothing_sent_is_none() -> None:
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await client.aclose()
        assert await receive_frame(server, FrameDecoder()) is None


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 9])
async def test_peer_closing_mid_frame_is_broken(cut: int) -> None:
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await client.send_all(encode_frame(b'{"a":123}')[:cut])
        await client.aclose()
        with pytest.raises(trio.BrokenResourceError):
            await receive_frame(server, FrameDecoder())


async def test_oversize_header_is_refused_without_waiting_for_the_body() -> None:
    """Only the four header bytes are ever sent; the refusal comes at once."""
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await client.send_all(struct.pack(">I", MAX_FRAME + 1))
        with pytest.raises(FrameError, match="exceeds the limit"):
            await receive_frame(server, FrameDecoder())


async def test_zero_length_is_refused() -> None:
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(5):
        await client.send_all(b"\x00\x00\x00\x00")
        with pytest.raises(FrameError, match="length 0"):
            await receive_frame(server, FrameDecoder())


async def test_frames_trickling_in_small_pieces() -> None:
    send, receive = trio.testing.lockstep_stream_pair()
    stream = encode_frame(b'{"first":1}') + encode_frame(b'{"second":2}')

    async def trickle() -> None:
        for index in range(0, len(stream), 3):
            await send.send_all(stream[index : index + 3])
        await send.aclose()

    decoder = FrameDecoder()
    got: list[bytes | None] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            for _ in range(3):
                got.append(await receive_frame(receive, decoder))
    assert got == [b'{"first":1}', b'{"second":2}', None]


async def test_a_slow_peer_is_bounded_by_the_callers_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(encode_frame(b"{}")[:5])
    with trio.move_on_after(10) as scope:
        await receive_frame(server, FrameDecoder())
    assert scope.cancelled_caught


async def test_over_a_real_socket_pair() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    big = b'{"blob":"' + b"x" * 1_000_000 + b'"}'
    a = trio.SocketStream(trio.socket.from_stdlib_socket(left))
    b = trio.SocketStream(trio.socket.from_stdlib_socket(right))
    async with a, b:
        decoder = FrameDecoder()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_frame, a, big)
                assert await receive_frame(b, decoder) == big
            await send_frame(b, b'{"id":1,"ok":{}}')
            assert await receive_frame(a, FrameDecoder()) == b'{"id":1,"ok":{}}'
            await a.send_all(encode_frame(b"{}")[:3])
            await a.aclose()
            with pytest.raises(trio.BrokenResourceError):
                await receive_frame(b, decoder)


async def test_send_frame_refuses_an_empty_body() -> None:
    client, _server = trio.testing.memory_stream_pair()
    with pytest.raises(ValueError):
        await send_frame(client, b"")


def socket_streams() -> tuple[trio.SocketStream, trio.SocketStream]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return (trio.SocketStream(trio.socket.from_stdlib_socket(left)),
            trio.SocketStream(trio.socket.from_stdlib_socket(right)))


async def test_send_frame_direct_takes_no_pass_of_the_scheduler_when_the_socket_takes_it() -> None:
    """The frame is written by one write, with no checkpoint: the writer of a turn's
    events runs once per event (send_frame's checkpoint would run it twice)."""
    a, b = socket_streams()
    async with a, b:
        with trio.fail_after(5):
            with trio.testing.assert_no_checkpoints():
                await send_frame_direct(a, b'{"id":1,"event":{}}')
                await send_frame_direct(a, b'{"id":1,"done":{}}')
            decoder = FrameDecoder()
            assert await receive_frame(b, decoder) == b'{"id":1,"event":{}}'
            assert await receive_frame(b, decoder) == b'{"id":1,"done":{}}'
            # the check can fail: send_frame yields
            with pytest.raises(AssertionError), trio.testing.assert_no_checkpoints():
                await send_frame(a, b"{}")


async def test_send_frame_direct_waits_while_the_socket_buffer_is_full() -> None:
    """A frame larger than the socket's buffer is written whole, as the peer reads."""
    a, b = socket_streams()
    big = b'{"blob":"' + b"x" * 4_000_000 + b'"}'
    async with a, b:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_frame_direct, a, big)
                assert await receive_frame(b, FrameDecoder()) == big


async def test_send_frame_direct_is_cancelled_while_it_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = socket_streams()
    async with a, b:
        with trio.move_on_after(10) as scope:  # the peer never reads: the wait is cut
            await send_frame_direct(a, b'{"blob":"' + b"x" * 4_000_000 + b'"}')
        assert scope.cancelled_caught


async def test_send_frame_direct_errors_are_send_alls() -> None:
    a, b = socket_streams()
    await b.aclose()
    with trio.fail_after(5):
        with pytest.raises(trio.BrokenResourceError):  # the peer is gone (EPIPE)
            await send_frame_direct(a, b"{}")
        await a.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await send_frame_direct(a, b"{}")
