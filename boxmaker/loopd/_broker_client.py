"""BrokerPort: loopd's side of broker.sock, one connection per call (06-loopd).

The deadline is `timeout_ms` from the start of the call, for connecting,
sending and the answer (the tool's run included): one time, each wait a cancel
scope up to it, not a per-read timeout.  After a `pending` frame it moves to
`expires_at` plus `timeout_ms`, never more than a day from now.  The call is an
async iterator the turn pulls (each `pending` answer, then the outcome), so
that nothing calls back into the turn.

Six cases end as `BrokerUnavailable` (loopd turns them into `tool_denied`
`broker_unavailable`): connection refused or missing socket; a server whose
uid is not `brokerd_uid`; brokerd closing without an answer; an answer that
does not decode; an answer for another id; the deadline passing.
Cancellation (bxctl went away) and closing the iterator close the connection,
which makes brokerd withdraw a pending approval and record that.

`tools` asks broker.sock's `tools` query (12-tool-sources) under the same
deadline and ends in the same six cases (and an error answer) as
`BrokerUnavailable`.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import secrets
from collections.abc import AsyncGenerator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

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
    ToolsAnswer,
    ToolsQuery,
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
BrokerAnswer = Pending | BrokerOutcome
"""What `BrokerPort.call` yields: any number of `pending`, then one outcome."""
_Step = TypeVar("_Step")


def _wall_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@attrs.define
class BrokerPort:
    """Calls brokerd for one tool call at a time (several may run at once)."""

    socket_path: Path
    timeout_ms: int
    brokerd_uid: int
    wall_clock: Callable[[], dt.datetime] = _wall_now

    async def call(self, *, session: str, tool: str,
                   args: dict[str, Any]) -> AsyncGenerator[BrokerAnswer, None]:
        """Ask brokerd: each `pending` answer as it comes, then the call's outcome.

        The caller pulls the answers (and closes the iterator: `aclosing`), so
        that brokerd's answers reach it without a call into it.  The deadline is
        one time, each wait a cancel scope up to it, none held across a yield.
        """
        request = BrokerRequest(id=U64(secrets.randbits(63)),
                                call=Call(session=session, tool=tool, args=JsonObject(args)))
        deadline = trio.current_time() + self.timeout_ms / 1000
        opened = await self._by(deadline, self._open())
        if isinstance(opened, BrokerUnavailable):
            yield opened
            return
        async with opened as stream:
            refused = self._refused(stream)
            if refused is not None:
                yield refused
                return
            decoder = FrameDecoder()
            answer = await self._by(deadline, self._ask(stream, decoder, request))
            while isinstance(answer, Pending):
                deadline = self._moved_deadline(answer)
                yield answer
                answer = await self._by(deadline, self._answer(stream, decoder, request.id))
        if isinstance(answer, ToolsAnswer):
            answer = BrokerUnavailable(reason="brokerd's answer is not a call's answer")
        yield answer

    async def tools(self) -> ToolsAnswer | BrokerUnavailable:
        """broker.sock's `tools` answer: the offered tool-source tools."""
        request = BrokerRequest(id=U64(secrets.randbits(63)), call=ToolsQuery())
        deadline = trio.current_time() + self.timeout_ms / 1000
        opened = await self._by(deadline, self._open())
        if isinstance(opened, BrokerUnavailable):
            return opened
        async with opened as stream:
            refused = self._refused(stream)
            if refused is not None:
                return refused
            answer = await self._by(deadline, self._ask(stream, FrameDecoder(), request))
        if isinstance(answer, ToolsAnswer | BrokerUnavailable):
            return answer
        if isinstance(answer, ErrorAnswer):
            return BrokerUnavailable(reason=f"brokerd answered the tools query with error "
                                            f"{answer.code}")
        return BrokerUnavailable(reason="brokerd's answer is not a tools answer")

    async def _by(self, deadline: float,
                  step: Coroutine[Any, Any, _Step]) -> _Step | BrokerUnavailable:
        with trio.move_on_at(deadline):
            return await step
        return BrokerUnavailable(
            reason=f"brokerd did not answer within the deadline ({self.timeout_ms} ms)"
        )

    async def _open(self) -> trio.SocketStream | BrokerUnavailable:
        try:
            return await trio.open_unix_socket(str(self.socket_path))
        except OSError as exc:
            what = "is missing" if exc.errno == errno.ENOENT else "refused the connection"
            return BrokerUnavailable(
                reason=f"brokerd's socket {self.socket_path} {what} ({exc.strerror})"
            )

    def _refused(self, stream: trio.SocketStream) -> BrokerUnavailable | None:
        """Why the server on the socket is not brokerd, or None."""
        try:
            server = peer_credentials(stream.socket)
        except OSError as exc:
            return BrokerUnavailable(reason=f"brokerd's uid cannot be read ({exc.strerror})")
        if not served_by(server, self.brokerd_uid):
            return BrokerUnavailable(
                reason=f"the server on {self.socket_path} runs as uid {server.uid}, "
                f"expected brokerd's uid {self.brokerd_uid}"
            )
        return None

    async def _ask(self, stream: trio.SocketStream, decoder: FrameDecoder,
                   request: BrokerRequest) -> BrokerAnswer | ToolsAnswer:
        try:
            await send_frame(stream, encode_broker_request(request))
        except (trio.BrokenResourceError, OSError) as exc:
            return _broke(exc)
        return await self._answer(stream, decoder, request.id)

    async def _answer(self, stream: trio.SocketStream, decoder: FrameDecoder,
                      request_id: int) -> BrokerAnswer | ToolsAnswer:
        """The next answer: `pending`, or the call's outcome (or the `tools` answer)."""
        try:
            body = await receive_frame(stream, decoder)
            if body is None:
                return BrokerUnavailable(reason="brokerd closed the connection without "
                                                "an answer")
            answer_id, answer = decode_broker_answer(body)
        except DecodeError as exc:
            return BrokerUnavailable(reason=f"brokerd's answer does not decode ({exc})")
        except (trio.BrokenResourceError, OSError) as exc:
            return _broke(exc)
        if answer_id != request_id:
            return BrokerUnavailable(
                reason=f"brokerd answered request {answer_id}, not {request_id}"
            )
        if isinstance(answer, (Pending, Result, Denied, ErrorAnswer, ToolsAnswer)):
            return answer
        return BrokerUnavailable(reason="brokerd's answer is not a call's answer")

    def _moved_deadline(self, pending: Pending) -> float:
        """After `pending`: `expires_at` plus `timeout_ms`, at most a day from now."""
        now_trio = trio.current_time()
        try:
            until_expiry = (parse_ts(pending.expires_at) - self.wall_clock()).total_seconds()
        except ValueError:  # pragma: no cover - the wire validated the format
            until_expiry = ONE_DAY_S
        wanted = max(0.0, until_expiry) + self.timeout_ms / 1000
        return now_trio + min(wanted, ONE_DAY_S)


def _broke(exc: Exception) -> BrokerUnavailable:
    return BrokerUnavailable(reason=f"the connection to brokerd broke ({exc})")
