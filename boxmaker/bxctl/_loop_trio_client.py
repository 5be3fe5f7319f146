"""bxctl's side of loop.sock: connect (checking loopd's uid), send, read frames."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from .._sockets._streams import receive_frame, send_frame
from .._sockets._unix import peer_credentials, served_by
from ..proto._convert import U64
from ..proto._errors import DecodeError
from ..proto._framing import FrameDecoder
from ..proto._json import loads_object
from ..proto.wire import (
    LoopFrame,
    LoopRequest,
    LoopRequestBody,
    decode_loop_frame,
    encode_loop_request,
)
from ._admin_client import DaemonUnreachable


def _show(path: Path) -> str:
    return repr(os.fsdecode(path))


def _unreachable(path: Path, why: str, *, sent: bool) -> DaemonUnreachable:
    if sent:
        return DaemonUnreachable(
            f"loopd at {_show(path)} {why}; the turn may or may not have run: "
            "`bxctl chat` shows the conversation",
            sent=True,
        )
    return DaemonUnreachable(
        f"cannot reach loopd at {_show(path)} ({why}); nothing was sent",
        sent=False,
    )


@attrs.frozen
class Undecodable:
    """A whole frame that bxctl cannot read (the stream itself is still in step)."""

    reason: str


class LoopConnection:
    """One loop.sock connection carrying one request and its frames."""

    def __init__(self, stream: trio.SocketStream, path: Path, request_id: int) -> None:
        self.stream = stream
        self.path = path
        self.request_id = request_id
        self._decoder = FrameDecoder()

    async def frames(self) -> AsyncIterator[tuple[dict[str, object], LoopFrame] | Undecodable]:
        """Each frame as (the JSON object received, the decoded frame), until close.

        A frame whose body does not decode (not JSON, too deep, an unknown field,
        another request's id) comes as `Undecodable`, and reading goes on; a bad
        frame header or a broken connection ends it (DaemonUnreachable).
        """
        while True:
            try:
                body = await receive_frame(self.stream, self._decoder)
            except DecodeError as exc:
                raise _unreachable(self.path, f"sent a frame that does not decode ({exc})",
                                   sent=True) from None
            except (trio.BrokenResourceError, OSError) as exc:
                raise _unreachable(self.path, f"broke the connection ({exc})",
                                   sent=True) from None
            if body is None:
                return
            try:
                answer_id, frame = decode_loop_frame(body)
            except DecodeError as exc:
                yield Undecodable(str(exc))
                continue
            if answer_id not in (self.request_id, None):
                yield Undecodable("it answers another request")
                continue
            yield loads_object(body), frame


@asynccontextmanager
async def open_request(path: Path, body: LoopRequestBody, *,
                       loopd_uid: int) -> AsyncIterator[LoopConnection]:
    """Connect, check the server is loopd's uid, send `body`; closing cancels a turn."""
    try:
        with trio.fail_after(10):
            stream = await trio.open_unix_socket(os.fsdecode(path))
    except FileNotFoundError:
        raise _unreachable(path, "no such socket; is loopd running?", sent=False) from None
    except ConnectionRefusedError:
        raise _unreachable(path, "connection refused; loopd is not running",
                           sent=False) from None
    except trio.TooSlowError:
        raise _unreachable(path, "no connection within 10 s", sent=False) from None
    except OSError as exc:
        raise _unreachable(path, exc.strerror or type(exc).__name__, sent=False) from None
    async with stream:
        server = peer_credentials(stream.socket)
        uid = server.uid
        if not served_by(server, loopd_uid):
            raise _unreachable(path, f"the socket is served by uid {uid}, not by loopd's uid "
                                     f"{loopd_uid}; refusing to talk to it", sent=False)
        request_id = secrets.randbits(63)
        request = LoopRequest(id=U64(request_id), body=body)
        try:
            await send_frame(stream, encode_loop_request(request))
        except (trio.BrokenResourceError, OSError) as exc:
            raise _unreachable(path, f"broke the connection ({exc})", sent=True) from None
        yield LoopConnection(stream, path, request_id)
