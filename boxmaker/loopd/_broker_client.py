"""BrokerPort: loopd's side of broker.sock, one connection per call (06-loopd).

The deadline is `timeout_ms` from the start of the call, for connecting,
sending and the answer (the tool's run included): one cancel scope, not a
per-read timeout.  After a `pending` frame it moves to `expires_at` plus
`timeout_ms`, never more than a day from now.

Six cases end as `BrokerUnavailable` (loopd turns them into `tool_denied`
`broker_unavailable`): connection refused or missing socket; a server whose
uid is not `brokerd_uid`; brokerd closing without an answer; an answer that
does not decode; an answer for another id; the deadline passing.
Cancellation (bxctl went away) closes the connection, which makes brokerd
withdraw a pending approval and record that.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from .._error_table import condition
from .._sockets._streams import receive_frame, send_frame
from .._sockets._unix import peer_credentials, served_by
from ..proto._convert import U64, JsonObject
from ..proto._errors import DecodeError
from ..proto._framing import FrameDecoder
from ..proto.wire import (
    BrokerRequest,
    Call,
    Denied,
    ErrorAnswer,
    Pending,
    Result,
    decode_broker_answer,
    encode_broker_request,
    parse_ts,
)

log = logging.getLogger("boxmaker.loopd")

ONE_DAY_S = 86_400.0
BROKER_UNAVAILABLE_RUNBOOK = condition("broker_unavailable")


@attrs.frozen(kw_only=True)
class BrokerUnavailable:
    """No usable answer from brokerd; `reason` says which of the six cases."""

    reason: str


BrokerOutcome = Result | Denied | ErrorAnswer | BrokerUnavailable


def _wall_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@attrs.define
class BrokerPort:
    """Calls brokerd for one tool call at a time (several may run at once)."""

    socket_path: Path
    timeout_ms: int
    brokerd_uid: int
    wall_clock: Callable[[], dt.datetime] = _wall_now

    async def call(
        self,
        *,
        session: str,
        tool: str,
        args: dict[str, Any],
        on_pending: Callable[[Pending], Awaitable[None]],
    ) -> BrokerOutcome:
        """Ask brokerd; `on_pending` runs when the call waits for the owner."""
        request_id = secrets.randbits(63)
        timeout_s = self.timeout_ms / 1000
        with trio.move_on_after(timeout_s) as scope:
            outcome = await self._exchange(request_id, session, tool, args, on_pending, scope)
        if scope.cancelled_caught:
            return BrokerUnavailable(
                reason=f"brokerd did not answer within the deadline ({self.timeout_ms} ms)"
            )
        return outcome

    async def _exchange(
        self,
        request_id: int,
        session: str,
        tool: str,
        args: dict[str, Any],
        on_pending: Callable[[Pending], Awaitable[None]],
        scope: trio.CancelScope,
    ) -> BrokerOutcome:
        try:
            stream = await trio.open_unix_socket(str(self.socket_path))
        except OSError as exc:
            what = "is missing" if exc.errno == errno.ENOENT else "refused the connection"
            return BrokerUnavailable(
                reason=f"brokerd's socket {self.socket_path} {what} ({exc.strerror})"
            )
        async with stream:
            try:
                server = peer_credentials(stream.socket)
            except OSError as exc:
                return BrokerUnavailable(reason=f"brokerd's uid cannot be read ({exc.strerror})")
            server_uid = server.uid
            if not served_by(server, self.brokerd_uid):
                return BrokerUnavailable(
                    reason=f"the server on {self.socket_path} runs as uid {server_uid}, "
                    f"expected brokerd's uid {self.brokerd_uid}"
                )
            request = BrokerRequest(id=U64(request_id),
                                    call=Call(session=session, tool=tool, args=JsonObject(args)))
            decoder = FrameDecoder()
            try:
                await send_frame(stream, encode_broker_request(request))
                while True:
                    body = await receive_frame(stream, decoder)
                    if body is None:
                        return BrokerUnavailable(reason="brokerd closed the connection without "
                                                        "an answer")
                    answer_id, answer = decode_broker_answer(body)
                    if answer_id != request_id:
                        return BrokerUnavailable(
                            reason=f"brokerd answered request {answer_id}, not {request_id}"
                        )
                    if isinstance(answer, Pending):
                        self._move_deadline(scope, answer)
                        await on_pending(answer)
                        continue
                    if isinstance(answer, (Result, Denied, ErrorAnswer)):
                        return answer
                    return BrokerUnavailable(reason="brokerd's answer is not a call's answer")
            except DecodeError as exc:
                return BrokerUnavailable(reason=f"brokerd's answer does not decode ({exc})")
            except (trio.BrokenResourceError, OSError) as exc:
                return BrokerUnavailable(reason=f"the connection to brokerd broke ({exc})")

    def _move_deadline(self, scope: trio.CancelScope, pending: Pending) -> None:
        """After `pending`: `expires_at` plus `timeout_ms`, at most a day from now."""
        now_trio = trio.current_time()
        try:
            until_expiry = (parse_ts(pending.expires_at) - self.wall_clock()).total_seconds()
        except ValueError:  # pragma: no cover - the wire validated the format
            until_expiry = ONE_DAY_S
        wanted = max(0.0, until_expiry) + self.timeout_ms / 1000
        scope.deadline = now_trio + min(wanted, ONE_DAY_S)
