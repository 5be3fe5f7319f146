"""A client of brokerd's admin.sock for bxctl (02-wire "admin.sock", 07-bxctl).

One request per connection.  Before sending anything it checks, with
SO_PEERCRED, that the socket is served by the expected brokerd uid (config
`brokerd_uid`), so a socket planted by someone else cannot show a fake
approval.  It waits at most 30 s for the answer; when none comes it says that
brokerd may or may not have acted.  Every failure to reach brokerd is a
`DaemonUnreachable` (exit 3, `#daemon-unreachable`).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import click
import trio

from .._error_table import shown
from .._errors import UnavailableError
from .._unix import peer_credentials, served_by
from ..proto._convert import U64
from ..proto._errors import DecodeError
from ..proto._framing import FrameDecoder, encode_frame
from ..proto._wire_admin import (
    AdminAnswer,
    AdminRequest,
    AdminRequestBody,
    decode_admin_answer,
    encode_admin_request,
)

ANSWER_SECONDS = 30.0
EXIT_UNREACHABLE = 3


class DaemonUnreachable(UnavailableError, click.ClickException):
    """brokerd could not be reached, or did not answer in time (exit 3)."""

    exit_code = EXIT_UNREACHABLE

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent
        """True when the request went out: brokerd may have acted."""

    def format_message(self) -> str:
        return shown(self.message, self)

    def show(self, file: object = None) -> None:
        click.echo(f"bxctl: {self.format_message()}", err=True)


def _show(path: Path) -> str:
    return repr(os.fsdecode(path))


def _not_sent(path: Path, why: str) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"cannot reach brokerd at {_show(path)} ({why}); nothing was sent",
        sent=False,
    )


def _maybe_acted(path: Path, why: str) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"brokerd at {_show(path)} {why}; it may or may not have acted: "
        "`bxctl approvals` and `bxctl audit show` tell whether it did",
        sent=True,
    )


def request(path: Path, body: AdminRequestBody, *, brokerd_uid: int,
            timeout: float = ANSWER_SECONDS, request_id: int = 1) -> AdminAnswer:
    """Send one admin request and return brokerd's answer (an ErrorAnswer included)."""
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(os.fsencode(path))
        except FileNotFoundError:
            raise _not_sent(path, "no such socket; is brokerd running?") from None
        except ConnectionRefusedError:
            raise _not_sent(path, "connection refused; brokerd is not running") from None
        except TimeoutError:
            raise _not_sent(path, f"no connection within {timeout:g} s") from None
        except OSError as exc:
            raise _not_sent(path, exc.strerror or type(exc).__name__) from None
        server = peer_credentials(sock)
        uid = server.uid
        if not served_by(server, brokerd_uid):
            raise _not_sent(
                path, f"the socket is served by uid {uid}, not by brokerd's uid {brokerd_uid}; "
                "refusing to talk to it")
        frame = encode_frame(encode_admin_request(AdminRequest(id=U64(request_id), body=body)))
        try:
            sock.sendall(frame)
        except OSError as exc:
            raise _maybe_acted(path, f"broke the connection ({exc.strerror})") from None
        decoder = FrameDecoder()
        while True:
            try:
                answer_body = decoder.next_frame()
            except DecodeError:
                raise _maybe_acted(path, "sent a frame that does not decode") from None
            if answer_body is not None:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _maybe_acted(path, f"did not answer within {timeout:g} s")
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                raise _maybe_acted(path, f"did not answer within {timeout:g} s") from None
            except OSError as exc:
                raise _maybe_acted(path, f"broke the connection ({exc.strerror})") from None
            if not data:
                raise _maybe_acted(path, "closed the connection without an answer")
            try:
                decoder.feed(data)
            except DecodeError:
                raise _maybe_acted(path, "sent a frame that does not decode") from None
    finally:
        sock.close()
    try:
        answer_id, answer = decode_admin_answer(answer_body)
    except DecodeError as exc:
        raise _maybe_acted(path, f"sent an answer that does not decode ({exc})") from None
    if answer_id not in (request_id, None):
        raise _maybe_acted(path, "answered another request")
    return answer


async def request_async(path: Path, body: AdminRequestBody, *, brokerd_uid: int,
                        timeout: float = ANSWER_SECONDS) -> AdminAnswer:
    """`request` for trio code (bxctl chat fetching an approval by id)."""
    return await trio.to_thread.run_sync(
        lambda: request(path, body, brokerd_uid=brokerd_uid, timeout=timeout),
        abandon_on_cancel=True,
    )
