"""bxctl's side of loop.sock: connect (checking loopd's uid), send, read frames.

Blocking, over `boxmaker._sockets._framed_client` (no trio): `bxctl chat --say`
sends one `say` and reads the turn's frames as they come, so that its first
token is not behind trio's import.  The interactive chat's trio twin,
`_loop_trio_client`, sends the same messages, reads frames with the same
framing and words its failures with what is here (`read_frame`,
`loop_unreachable`): the two say the same thing for the same fault.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from .._sockets._framed_client import ExchangeFailed, FramedLink, open_link
from ..proto._convert import U64
from ..proto._errors import DecodeError
from ..proto._json import loads_object
from ..proto.wire import (
    LoopFrame,
    LoopRequest,
    LoopRequestBody,
    decode_loop_frame,
    encode_loop_request,
)
from ._admin_client import DaemonUnreachable

CONNECT_SECONDS = 10.0
"""How long connecting to loop.sock may take (the turn itself has no limit)."""


def _show(path: Path) -> str:
    return repr(os.fsdecode(path))


def loop_unreachable(path: Path, why: str, *, sent: bool) -> DaemonUnreachable:
    """loopd could not be reached (nothing sent), or the connection failed after the
    request went out (the turn may have run)."""
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


def broken(exc: BaseException | None) -> str:
    """What a broken connection is called (trio's words for the same OSError)."""
    return f"broke the connection (socket connection broken: {exc})"


@attrs.frozen
class Undecodable:
    """A whole frame that bxctl cannot read (the stream itself is still in step)."""

    reason: str


def new_request_id() -> int:
    """A random 63-bit request id (the kernel's randomness, as `secrets` has it)."""
    return int.from_bytes(os.urandom(8), "big") >> 1


def read_frame(body: bytes, request_id: int) -> tuple[dict[str, object], LoopFrame] | Undecodable:
    """One frame's body as (the JSON object received, the decoded frame).

    A body that does not decode (not JSON, too deep, an unknown field) or that
    answers another request's id is `Undecodable`: said, skipped, and reading goes on.
    """
    try:
        answer_id, frame = decode_loop_frame(body)
    except DecodeError as exc:
        return Undecodable(str(exc))
    if answer_id not in (request_id, None):
        return Undecodable("it answers another request")
    return loads_object(body), frame


class LoopLink:
    """One loop.sock connection carrying one request and its frames."""

    def __init__(self, link: FramedLink, path: Path, request_id: int) -> None:
        self._link = link
        self.path = path
        self.request_id = request_id

    def frames(self, deadline: float | None = None
               ) -> Iterator[tuple[dict[str, object], LoopFrame] | Undecodable]:
        """Each frame (as `read_frame` gives it) until loopd closes the connection.

        `deadline` (`time.monotonic()`) bounds every wait; None waits as long as
        the turn takes.  A bad frame header, a broken connection or the deadline
        ends it (DaemonUnreachable, sent).
        """
        while True:
            try:
                body = self._link.receive(deadline)
            except ExchangeFailed as failed:
                raise loop_unreachable(self.path, _why(failed), sent=True) from None
            if body is None:
                return
            yield read_frame(body, self.request_id)


def _why(failed: ExchangeFailed) -> str:
    if failed.step == "undecodable":
        return f"sent a frame that does not decode ({failed.error})"
    if failed.step == "timeout":
        return "did not answer in time"
    if failed.step == "closed":
        return "broke the connection (the peer closed the connection inside a frame)"
    return broken(failed.error)


def _not_opened(path: Path, failed: ExchangeFailed, *, loopd_uid: int,
                connect_timeout: float) -> DaemonUnreachable:
    error = failed.error
    if failed.step == "wrong_server":
        return loop_unreachable(
            path, f"the socket is served by uid {failed.server_uid}, not by loopd's uid "
            f"{loopd_uid}; refusing to talk to it", sent=False)
    if failed.step != "connect":  # the send
        return loop_unreachable(path, broken(error), sent=True)
    if isinstance(error, FileNotFoundError):
        return loop_unreachable(path, "no such socket; is loopd running?", sent=False)
    if isinstance(error, ConnectionRefusedError):
        return loop_unreachable(path, "connection refused; loopd is not running", sent=False)
    if isinstance(error, TimeoutError):
        return loop_unreachable(path, f"no connection within {connect_timeout:g} s",
                                sent=False)
    strerror = error.strerror if isinstance(error, OSError) else None
    return loop_unreachable(path, strerror or type(error).__name__, sent=False)


@contextmanager
def open_request(path: Path, body: LoopRequestBody, *, loopd_uid: int,
                 connect_timeout: float = CONNECT_SECONDS) -> Iterator[LoopLink]:
    """Connect, check the server is loopd's uid, send `body`; leaving cancels a turn."""
    request_id = new_request_id()
    request = encode_loop_request(LoopRequest(id=U64(request_id), body=body))
    try:
        link = open_link(path, request, server_uid=loopd_uid, connect_timeout=connect_timeout)
    except ExchangeFailed as failed:
        raise _not_opened(path, failed, loopd_uid=loopd_uid,
                          connect_timeout=connect_timeout) from None
    with link:
        yield LoopLink(link, path, request_id)
