"""One connection shell for every framed socket (02-wire "Framing", 05-brokerd "Serving").

broker.sock and admin.sock (brokerd) and loop.sock (loopd) are served by
this shell; infer.sock speaks HTTP and keeps its own server.  Each accepted
connection is a task, and goes through the same steps:

1. the peer's uid (SO_PEERCRED) against the socket's allowed uids: any other
   uid gets one `forbidden` error and the connection is closed;
2. one request frame, within `REQUEST_FRAME_SECONDS` of the accept, decoded
   strictly by the daemon's decoder: a bad header, a body that does not
   decode or another `v` gets one `bad_frame` or `bad_version` error (with
   the request's id when it could be read) and the connection is closed;
3. the daemon's handler, given the decoded request.

A connection that fails in any way (the peer resets it, a bug in a handler)
is logged and closed; the daemon goes on serving.  The listener pauses while
descriptors or memory run out (`_unix_accept.accept_loop`); at most
`max_connections` connections of one socket are served at once.

What the error frames say is each daemon's own (`Wording`): brokerd and
loopd had worded them differently before they shared this shell, and wire
text does not change.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import attrs
import trio

from .._error_table import condition
from ..proto._errors import DecodeError, FrameError
from ..proto._escape import escape_line
from ..proto._framing import MAX_FRAME, FrameDecoder
from ..proto.wire import BadVersion, ErrorCode, error_answer, error_frame, peek_id
from ._streams import receive_frame, send_frame
from ._unix import ListenerLost, PeerCred, peer_credentials
from ._unix_accept import accept_loop

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "LINGER_BYTES",
    "LINGER_SECONDS",
    "MAX_CONNECTIONS_MAX",
    "MAX_FRAME",
    "REQUEST_FRAME_SECONDS",
    "FramedServer",
    "FramedSocket",
    "Handler",
    "Wording",
    "linger_close",
]

log = logging.getLogger("boxmaker.sockets")

REQUEST_FRAME_SECONDS = 10.0
"""A request frame must arrive within 10 s of the connection being accepted (02-wire)."""
STOP_GRACE_SECONDS = 0.5
"""When the daemon stops, how long an accepted connection still has for its request frame."""
DEFAULT_MAX_CONNECTIONS = 256
"""Connections served at once per socket (brokerd's `[sockets] max_connections` default)."""
MAX_CONNECTIONS_MAX = 65_536
LINGER_SECONDS = 1.0
"""After an error answer, how long the peer's remaining input is drained."""
LINGER_BYTES = 1 << 20

Request = TypeVar("Request")
Handler = Callable[[trio.SocketStream, PeerCred, Request], Awaitable[None]]
"""The daemon's part: answer one decoded request on its connection."""


@attrs.frozen(kw_only=True)
class Wording:
    """The messages of the shell's error frames on one socket (`str.format` templates).

    `forbidden` gets `uid` and `name`; `bad_header` and `undecodable` get
    `error`; `no_frame` gets `seconds` (None: a peer that sends nothing in
    time is closed without an answer); `bad_version` None: the decoder's own
    message.
    """

    forbidden: str
    bad_header: str
    undecodable: str
    bad_version: str | None
    no_frame: str | None


@attrs.frozen(kw_only=True)
class FramedSocket(Generic[Request]):
    """One framed socket as a daemon serves it."""

    name: str
    allowed_uids: frozenset[int]
    decode: Callable[[bytes], Request]
    """Strict decoding of one request frame: raises DecodeError (BadVersion for `v`)."""
    handle: Handler[Request]
    wording: Wording
    max_connections: int = DEFAULT_MAX_CONNECTIONS


async def linger_close(stream: trio.abc.Stream) -> None:
    """After an error answer: half-close, then discard what the peer still sends.

    Closing a socket with unread input makes the kernel reset the connection,
    and the peer may lose our answer; this lets the answer arrive first.
    """
    try:
        if isinstance(stream, trio.SocketStream):
            await stream.send_eof()
        drained = 0
        with trio.move_on_after(LINGER_SECONDS):
            while drained < LINGER_BYTES:
                data = await stream.receive_some(65536)
                if not data:
                    break
                drained += len(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return  # the peer is gone: nothing is left to drain


class FramedServer:
    """The shell of one daemon; its sockets stop accepting and reading together."""

    def __init__(self) -> None:
        self.stopping = False
        self._accepting: set[trio.CancelScope] = set()
        self._reading: set[trio.CancelScope] = set()

    def stop_accepting(self) -> None:
        """Every `serve` stops accepting and returns once its connections have ended."""
        for scope in list(self._accepting):
            scope.cancel()

    def stop_reading(self) -> None:
        """Connections still waiting for their request frame get `STOP_GRACE_SECONDS`
        for it (a client sends it at once after connecting), then are closed, unanswered."""
        self.stopping = True
        deadline = trio.current_time() + STOP_GRACE_SECONDS
        for scope in list(self._reading):
            scope.deadline = min(scope.deadline, deadline)

    async def serve(
        self,
        listener: trio.socket.SocketType,
        framed: FramedSocket[Request],
        *,
        on_lost: Callable[[ListenerLost], None] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on `listener` (listening) until `stop_accepting`, one task per connection.

        Returns when accepting has stopped and every connection has ended.  A
        lost listener raises ListenerLost, cancelling the connections; with
        `on_lost`, it is handed to `on_lost` instead and the connections finish.
        """

        async def one(conn: trio.socket.SocketType) -> None:
            await self.connection(conn, framed)

        async with trio.open_nursery() as connections:
            with trio.CancelScope() as accepting:
                self._accepting.add(accepting)
                task_status.started()
                try:
                    await accept_loop(listener, one, connections, name=framed.name,
                                      max_connections=framed.max_connections)
                except ListenerLost as exc:
                    if on_lost is None:
                        raise
                    log.error("%s: %s; no more connections are accepted", framed.name, exc)
                    on_lost(exc)
                finally:
                    self._accepting.discard(accepting)

    async def connection(self, sock: trio.socket.SocketType,
                         framed: FramedSocket[Request]) -> None:
        """One accepted connection, from the peer check to its close; failures stay here."""
        stream = trio.SocketStream(sock)
        name = framed.name
        try:
            try:
                peer = peer_credentials(sock)
            except OSError as exc:
                log.warning("%s: peer credentials unavailable (%s); connection closed", name, exc)
                return
            if peer.uid not in framed.allowed_uids:
                log.warning("%s: refused a peer with uid %d (pid %d): not allowed on this "
                            "socket. See %s", name, peer.uid, peer.pid, condition("forbidden_peer"))
                message = framed.wording.forbidden.format(uid=peer.uid, name=name)
                await _send_error(stream, None, "forbidden", message)
                await linger_close(stream)
                return
            found = await self._read_request(stream, peer, framed)
            if found is not None:
                await framed.handle(stream, peer, found[0])
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("%s: the connection ended: %s", name, escape_line(str(exc)))
        except OSError as exc:
            log.warning("%s: the connection failed (%s); contained, the daemon goes on serving",
                        name, escape_line(str(exc)), exc_info=True)
        except Exception:
            log.exception("%s: a connection failed (contained; the daemon goes on serving)",
                          name)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _read_request(self, stream: trio.SocketStream, peer: PeerCred,
                            framed: FramedSocket[Request]) -> tuple[Request] | None:
        """The decoded request (in a 1-tuple), or None when the connection is done."""
        wording = framed.wording
        limit = STOP_GRACE_SECONDS if self.stopping else REQUEST_FRAME_SECONDS
        scope = trio.CancelScope(deadline=trio.current_time() + limit)
        self._reading.add(scope)
        try:
            with scope:
                try:
                    body = await receive_frame(stream, _decoder())
                except FrameError as exc:
                    await self._refuse(stream, peer, framed, None, "bad_frame",
                                       wording.bad_header.format(error=exc), exc)
                    return None
        finally:
            self._reading.discard(scope)
        if scope.cancelled_caught:
            if not self.stopping and wording.no_frame is not None:
                await _send_error(stream, None, "bad_frame",
                                  wording.no_frame.format(seconds=REQUEST_FRAME_SECONDS))
            return None
        if body is None:  # closed before sending anything
            return None
        try:
            return (framed.decode(body),)
        except BadVersion as exc:
            await self._refuse(stream, peer, framed, exc.id, "bad_version",
                               wording.bad_version or str(exc), exc)
        except DecodeError as exc:
            await self._refuse(stream, peer, framed, peek_id(body), "bad_frame",
                               wording.undecodable.format(error=exc), exc)
        return None

    async def _refuse(self, stream: trio.SocketStream, peer: PeerCred,
                      framed: FramedSocket[Request], request_id: int | None,
                      code: ErrorCode, message: str, exc: DecodeError) -> None:
        log.warning("%s: bad frame from pid %d uid %d: %s", framed.name, peer.pid, peer.uid,
                    escape_line(str(exc)))
        await _send_error(stream, request_id, code, message)
        await linger_close(stream)


def _decoder() -> FrameDecoder:
    return FrameDecoder(MAX_FRAME)


async def _send_error(stream: trio.abc.SendStream, request_id: int | None, code: ErrorCode,
                      message: str) -> None:
    """One `error` frame, its runbook pointer from the error table (02-wire "Errors")."""
    answer = error_answer(code, message)
    await send_frame(stream, error_frame(request_id, answer.code, answer.message, answer.runbook))
