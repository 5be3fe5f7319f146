"""A client of brokerd's admin.sock for bxctl (02-wire "admin.sock", 07-bxctl).

One request per connection, through `boxmaker._sockets._framed_client`: before
sending anything it checks, with SO_PEERCRED, that the socket is served by
the expected brokerd uid (config `brokerd_uid`), so a socket planted by
someone else cannot show a fake approval.  It waits at most 30 s for the
answer; when none comes it says that brokerd may or may not have acted.
Every failure to reach brokerd is a `DaemonUnreachable` (exit 3,
`#daemon-unreachable`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._error_table import shown
from .._errors import UnavailableError
from .._sockets._framed_client import ExchangeFailed, exchange
from ..proto._convert import U64
from ..proto._errors import DecodeError

if TYPE_CHECKING:
    from ..proto.wire import AdminAnswer, AdminRequestBody

ANSWER_SECONDS = 30.0
EXIT_UNREACHABLE = 3


class DaemonUnreachable(UnavailableError, click.ClickException):
    """brokerd could not be reached, or did not answer in time (exit 3)."""

    runbook = "docs/runbook.md#daemon-unreachable"

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
    # admin.sock's classes when a request is made: `bxctl chat --say` imports this
    # module for `DaemonUnreachable` and builds them only when a call waits for approval
    from ..proto.wire import AdminRequest, decode_admin_answer, encode_admin_request

    frame = encode_admin_request(AdminRequest(id=U64(request_id), body=body))
    try:
        answer_body = exchange(path, frame, server_uid=brokerd_uid, timeout=timeout)
    except ExchangeFailed as failed:
        raise _unreachable(path, failed, brokerd_uid=brokerd_uid, timeout=timeout) from None
    try:
        answer_id, answer = decode_admin_answer(answer_body)
    except DecodeError as exc:
        raise _maybe_acted(path, f"sent an answer that does not decode ({exc})") from None
    if answer_id not in (request_id, None):
        raise _maybe_acted(path, "answered another request")
    return answer


def _unreachable(path: Path, failed: ExchangeFailed, *, brokerd_uid: int,
                 timeout: float) -> DaemonUnreachable:
    error = failed.error
    step = failed.step
    if step == "connect":
        if isinstance(error, FileNotFoundError):
            return _not_sent(path, "no such socket; is brokerd running?")
        if isinstance(error, ConnectionRefusedError):
            return _not_sent(path, "connection refused; brokerd is not running")
        if isinstance(error, TimeoutError):
            return _not_sent(path, f"no connection within {timeout:g} s")
        strerror = error.strerror if isinstance(error, OSError) else None
        return _not_sent(path, strerror or type(error).__name__)
    if step == "wrong_server":
        return _not_sent(
            path, f"the socket is served by uid {failed.server_uid}, not by brokerd's uid "
            f"{brokerd_uid}; refusing to talk to it")
    if step in ("send", "receive"):
        strerror = error.strerror if isinstance(error, OSError) else None
        return _maybe_acted(path, f"broke the connection ({strerror})")
    if step == "undecodable":
        return _maybe_acted(path, "sent a frame that does not decode")
    if step == "timeout":
        return _maybe_acted(path, f"did not answer within {timeout:g} s")
    return _maybe_acted(path, "closed the connection without an answer")


async def request_async(path: Path, body: AdminRequestBody, *, brokerd_uid: int,
                        timeout: float = ANSWER_SECONDS) -> AdminAnswer:
    """`request` for trio code (bxctl chat fetching an approval by id)."""
    import trio  # only chat runs trio: `bxctl status` never loads it

    return await trio.to_thread.run_sync(
        lambda: request(path, body, brokerd_uid=brokerd_uid, timeout=timeout),
        abandon_on_cancel=True,
    )
