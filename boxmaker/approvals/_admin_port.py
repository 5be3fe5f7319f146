"""The approval page's client of brokerd's admin.sock (one request per connection).

Before sending anything it checks with SO_PEERCRED that the socket is served
by brokerd's uid, so a planted socket cannot show fake approvals (or by pid 1,
on the connection with which systemd starts brokerd: `served_by`); it waits at
most 30 s for the answer.  Every failure is `AdminUnreachable`.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import trio

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


class AdminUnreachable(UnavailableError):
    """brokerd could not be reached or did not answer (the message says which)."""


class AdminPort:
    def __init__(self, path: Path, *, brokerd_uid: int) -> None:
        self.path = path
        self.brokerd_uid = brokerd_uid

    async def ask(self, body: AdminRequestBody) -> AdminAnswer:
        where = repr(os.fsdecode(self.path))
        with trio.move_on_after(ANSWER_SECONDS) as scope:
            sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with sock:
                try:
                    await sock.connect(os.fsdecode(self.path))
                except OSError as exc:
                    raise AdminUnreachable(f"cannot reach brokerd at {where} "
                                           f"({exc.strerror or exc})") from None
                server = peer_credentials(sock)
                if not served_by(server, self.brokerd_uid):
                    raise AdminUnreachable(f"{where} is served by uid {server.uid}, not "
                                           f"brokerd's uid {self.brokerd_uid}")
                request = AdminRequest(id=U64(1), body=body)
                stream = trio.SocketStream(sock)
                try:
                    await stream.send_all(encode_frame(encode_admin_request(request)))
                    decoder = FrameDecoder()
                    while (frame := decoder.next_frame()) is None:
                        data = await stream.receive_some(65536)
                        if not data:
                            raise AdminUnreachable(f"brokerd at {where} closed the connection "
                                                   "without an answer")
                        decoder.feed(data)
                    _, answer = decode_admin_answer(frame)
                except (OSError, trio.BrokenResourceError) as exc:
                    raise AdminUnreachable(f"brokerd at {where} broke the connection "
                                           f"({getattr(exc, 'strerror', None) or exc})") from None
                except DecodeError as exc:
                    raise AdminUnreachable(f"brokerd at {where} sent an answer that does not "
                                           f"decode ({exc})") from None
                return answer
        assert scope.cancelled_caught
        raise AdminUnreachable(f"brokerd at {where} did not answer within "
                               f"{ANSWER_SECONDS:g} s")
