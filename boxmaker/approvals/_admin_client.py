"""The approval page's client of brokerd's admin.sock (one request per connection).

Through `boxmaker._sockets._framed_client` (in a worker thread): before sending
anything it checks with SO_PEERCRED that the socket is served by brokerd's
uid, so a planted socket cannot show fake approvals (or by pid 1, on the
connection with which systemd starts brokerd: `served_by`); it waits at most
30 s for the answer.  Every failure is `AdminUnreachable`.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import trio

from .._errors import UnavailableError
from .._sockets._framed_client import ExchangeFailed, exchange
from ..proto._convert import U64
from ..proto._errors import DecodeError
from ..proto.wire import (
    AdminAnswer,
    AdminRequest,
    AdminRequestBody,
    decode_admin_answer,
    encode_admin_request,
)

ANSWER_SECONDS = 30.0


class AdminUnreachable(UnavailableError):
    """brokerd could not be reached or did not answer (the message says which)."""


class AdminPort:
    def __init__(self, path: Path, *, brokerd_uid: int) -> None:
        self.path = path
        self.brokerd_uid = brokerd_uid

    async def ask(self, body: AdminRequestBody) -> AdminAnswer:
        where = repr(os.fsdecode(self.path))
        frame = encode_admin_request(AdminRequest(id=U64(1), body=body))
        try:
            # The bound is trio's (a cancel scope, so the mock clock tests it); the
            # worker's own socket timeout only ends an abandoned exchange soon after.
            with trio.fail_after(ANSWER_SECONDS):
                answer = await trio.to_thread.run_sync(
                    functools.partial(exchange, self.path, frame, server_uid=self.brokerd_uid,
                                      timeout=ANSWER_SECONDS + 1),
                    abandon_on_cancel=True,
                )
        except trio.TooSlowError:
            raise AdminUnreachable(
                f"brokerd at {where} did not answer within {ANSWER_SECONDS:g} s") from None
        except ExchangeFailed as failed:
            raise AdminUnreachable(self._why(where, failed)) from None
        try:
            _, decoded = decode_admin_answer(answer)
        except DecodeError as exc:
            raise AdminUnreachable(f"brokerd at {where} sent an answer that does not "
                                   f"decode ({exc})") from None
        return decoded

    def _why(self, where: str, failed: ExchangeFailed) -> str:
        error = failed.error
        if failed.step == "timeout" or isinstance(error, TimeoutError):
            return f"brokerd at {where} did not answer within {ANSWER_SECONDS:g} s"
        if failed.step == "connect":
            strerror = error.strerror if isinstance(error, OSError) else None
            return f"cannot reach brokerd at {where} ({strerror or error})"
        if failed.step == "wrong_server":
            return (f"{where} is served by uid {failed.server_uid}, not "
                    f"brokerd's uid {self.brokerd_uid}")
        if failed.step in ("send", "receive"):
            strerror = error.strerror if isinstance(error, OSError) else None
            return f"brokerd at {where} broke the connection ({strerror or error})"
        if failed.step == "undecodable":
            return f"brokerd at {where} sent an answer that does not decode ({error})"
        return f"brokerd at {where} closed the connection without an answer"
