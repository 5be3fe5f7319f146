"""bxctl's side of loop.sock for the interactive chat (trio): connect, send, read frames.

The twin of `_loop_client` (blocking, for `bxctl chat --say`): the same
messages, the same framing, and its words for every failure and every frame
that does not decode (`loop_unreachable`, `read_frame`).  Closing the
connection makes loopd cancel the turn: Ctrl-C cancels the scope around it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from .._sockets._streams import receive_frame, send_frame
from .._sockets._unix import peer_credentials, served_by
from ..proto._convert import U64
from ..proto._errors import DecodeError
from ..proto._framing import FrameDecoder
from ..proto.wire import LoopFrame, LoopRequest, LoopRequestBody, encode_loop_request
from ._loop_client import (
    CONNECT_SECONDS,
    Undecodable,
    loop_unreachable,
    new_request_id,
    read_frame,
)


class LoopConnection:
    """One loop.sock connection carrying one request and its frames."""

    def __init__(self, stream: trio.SocketStream, path: Path, request_id: int) -> None:
        self.stream = stream
        self.path = path
        self.request_id = request_id
        self._decoder = FrameDecoder()

    async def frames(self) -> AsyncGenerator[tuple[dict[str, object], LoopFrame] | Undecodable,
                                             None]:
        """Each frame as `read_frame` gives it, until close.

        A frame whose body does not decode (not JSON, too deep, an unknown field,
        another request's id) comes as `Undecodable`, and reading goes on; a bad
        frame header or a broken connection ends it (DaemonUnreachable).
        """
        while True:
            try:
                body = await receive_frame(self.stream, self._decoder)
            except DecodeError as exc:
                raise loop_unreachable(self.path, f"sent a frame that does not decode ({exc})",
                                       sent=True) from None
            except (trio.BrokenResourceError, OSError) as exc:
                raise loop_unreachable(self.path, f"broke the connection ({exc})",
                                       sent=True) from None
            if body is None:
                return
            yield read_frame(body, self.request_id)


@asynccontextmanager
async def open_request(path: Path, body: LoopRequestBody, *,
                       loopd_uid: int) -> AsyncIterator[LoopConnection]:
    """Connect, check the server is loopd's uid, send `body`; closing cancels a turn."""
    try:
        with trio.fail_after(CONNECT_SECONDS):
            stream = await trio.open_unix_socket(os.fsdecode(path))
    except FileNotFoundError:
        raise loop_unreachable(path, "no such socket; is loopd running?", sent=False) from None
    except ConnectionRefusedError:
        raise loop_unreachable(path, "connection refused; loopd is not running",
                               sent=False) from None
    except trio.TooSlowError:
        raise loop_unreachable(path, f"no connection within {CONNECT_SECONDS:g} s",
                               sent=False) from None
    except OSError as exc:
        raise loop_unreachable(path, exc.strerror or type(exc).__name__, sent=False) from None
    async with stream:
        server = peer_credentials(stream.socket)
        uid = server.uid
        if not served_by(server, loopd_uid):
            raise loop_unreachable(path, f"the socket is served by uid {uid}, not by loopd's "
                                         f"uid {loopd_uid}; refusing to talk to it", sent=False)
        request_id = new_request_id()
        request = LoopRequest(id=U64(request_id), body=body)
        try:
            await send_frame(stream, encode_loop_request(request))
        except (trio.BrokenResourceError, OSError) as exc:
            raise loop_unreachable(path, f"broke the connection ({exc})", sent=True) from None
        yield LoopConnection(stream, path, request_id)
