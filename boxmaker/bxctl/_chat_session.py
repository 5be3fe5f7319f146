"""The interactive `bxctl chat` (07-bxctl), in trio: one stdin reader, turns, approvals.

One reader owns stdin for the whole session (the chat line and the approval
question come from the same reader); each turn is shown as it arrives by
`ChatView` (as `bxctl chat --say` shows it).  On `approval_pending` the whole
approval is fetched by id from brokerd and shown; the owner approves by
typing its id, `r` refuses, Enter leaves it pending.  Ctrl-C during a turn
cancels the turn (closing the connection makes loopd cancel it); only end of
input ends the session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

import attrs
import trio

from ..proto.wire import (
    Approval,
    ApprovalPendingEvent,
    ApprovalRequest,
    ApproveRequest,
    ErrorAnswer,
    LoopStatus,
    LoopStatusRequest,
    RefuseRequest,
    SayRequest,
    Status,
    StatusRequest,
    ToolDeniedEvent,
    ToolResultEvent,
)
from ._admin_client import DaemonUnreachable, request_async
from ._chat_view import ChatView, describe, single
from ._config import BxctlConfig
from ._loop_client import Undecodable
from ._loop_trio_client import LoopConnection, open_request
from ._screen import terminal_width, wrap_own


class LineReader:
    """The one reader of stdin: whole lines, decoded as UTF-8, None at end of input."""

    def __init__(self, stream: trio.abc.ReceiveStream | None, fallback: TextIO) -> None:
        self._stream = stream
        self._fallback = fallback
        self._buffer = bytearray()
        self._eof = False

    @classmethod
    def for_stdin(cls) -> LineReader:
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return cls(None, sys.stdin)
        return cls(trio.lowlevel.FdStream(os.dup(fd)), sys.stdin)

    async def readline(self) -> str | None:
        if self._stream is None:
            text: str = await trio.to_thread.run_sync(self._fallback.readline)
            return text if text else None
        while b"\n" not in self._buffer and not self._eof:
            data = await self._stream.receive_some(4096)
            if not data:
                self._eof = True
            self._buffer += data
        if not self._buffer:
            return None
        end = self._buffer.find(b"\n")
        end = len(self._buffer) if end < 0 else end + 1
        line = bytes(self._buffer[:end])
        del self._buffer[:end]
        return line.decode("utf-8", errors="replace")

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()


@attrs.define
class ChatSession:
    config: BxctlConfig
    conversation: str
    view: ChatView
    reader: LineReader
    turn_scope: trio.CancelScope | None = None
    loop_status: LoopStatus | None = None
    """loopd's status as the banner read it (`/help` lists its MCP tools)."""

    async def run_turn(self, text: str) -> bool:
        """One turn; True when it ended with `done`.  A failure of the turn is said
        and returns False."""
        ok = False
        with trio.CancelScope() as scope:
            self.turn_scope = scope
            try:
                ok = await self._turn(text)
            except Exception as exc:  # noqa: BLE001 - a failed turn never ends the chat
                error = single(exc)
                if isinstance(error, DaemonUnreachable):
                    self.view.notice(error.format_message())
                else:
                    self.view.notice(f"the turn failed here ({describe(error)})")
            finally:
                self.turn_scope = None
        if scope.cancelled_caught:
            self.view.show("(turn cancelled)\n")
        return ok

    async def _turn(self, text: str) -> bool:
        say = SayRequest(conversation=self.conversation, text=text)
        async with open_request(self.config.loop_socket, say,
                                loopd_uid=self.config.loopd_uid) as conn, \
                trio.open_nursery() as questions:
            asking: dict[str, trio.CancelScope] = {}
            try:
                return await self._frames(conn, questions, asking)
            finally:
                questions.cancel_scope.cancel()

    async def _frames(self, conn: LoopConnection, questions: trio.Nursery,
                      asking: dict[str, trio.CancelScope]) -> bool:
        async with contextlib.aclosing(conn.frames()) as frames:
            async for item in frames:
                if isinstance(item, Undecodable):
                    self.view.undecodable(item.reason)
                    continue
                raw, frame = item
                if isinstance(frame, (ToolDeniedEvent, ToolResultEvent)):
                    moot = asking.pop(frame.call_id, None)
                    if moot is not None:
                        moot.cancel()
                ended = self.view.frame(raw, frame)
                if ended is not None:
                    return ended
                if isinstance(frame, ApprovalPendingEvent):
                    scope = trio.CancelScope()
                    asking[frame.call_id] = scope
                    questions.start_soon(self._ask, frame, scope)
        self.view.closed_early()
        return False

    async def _fetch(self, approval_id: int) -> Approval | None:
        answer = await request_async(self.config.admin_socket,
                                     ApprovalRequest(approval_id=approval_id),  # type: ignore[arg-type]
                                     brokerd_uid=self.config.brokerd_uid)
        if isinstance(answer, Approval):
            return answer
        if isinstance(answer, ErrorAnswer):
            self.view.notice(f"approval {approval_id}: {answer.message}")
        return None

    async def _ask(self, event: ApprovalPendingEvent, scope: trio.CancelScope) -> None:
        view = self.view
        with scope:
            try:
                approval = await self._fetch(event.approval_id)
            except DaemonUnreachable as exc:
                view.notice(exc.format_message())
                return
            if approval is None:
                return
            from ._admin_cmd import render_approval  # only when a call waits for approval

            block = render_approval(approval, width=terminal_width(),
                                    grants=self.config.grants)
            view.show("\n".join(block) + "\n")
            view.show("\n".join(wrap_own([(f"type {approval.approval_id} to approve, r to "
                                            "refuse, or Enter to leave it pending: ", False)],
                                          terminal_width())))
            view.asked = True
            line = await self.reader.readline()
            view.asked = False  # the owner's Enter ended the row
            await self._answer(approval.approval_id, (line or "").strip())

    async def _answer(self, approval_id: int, typed: str) -> None:
        view = self.view
        if typed == "":
            view.show(f"left pending; answer later with bxctl approve {approval_id}\n")
            return
        body: ApproveRequest | RefuseRequest
        if typed == str(approval_id):
            body, done_word = ApproveRequest(approval_id=approval_id), "approved"  # type: ignore[arg-type]
        elif typed.lower() == "r":
            body, done_word = RefuseRequest(approval_id=approval_id, reason=None), "refused"  # type: ignore[arg-type]
        else:
            view.show(f"that is not approval {approval_id}'s id; it stays pending\n")
            return
        try:
            answer = await request_async(self.config.admin_socket, body,
                                         brokerd_uid=self.config.brokerd_uid)
        except DaemonUnreachable as exc:
            view.notice(exc.format_message())
            return
        if isinstance(answer, ErrorAnswer):
            view.notice(f"approval {approval_id}: {answer.message}")
        else:
            view.show(f"{done_word} {approval_id}\n")

    async def banner(self) -> None:
        from ._chat_banner import banner_parts

        self.view.write("\n".join(wrap_own([(f"boxmaker chat · conversation "
                                              f"{self.conversation} · Ctrl-D leaves, "
                                              "Ctrl-C cancels a turn", False)],
                                            terminal_width())) + "\n")
        status: object = None
        try:
            with trio.fail_after(5):
                status = await request_async(self.config.admin_socket, StatusRequest(),
                                             brokerd_uid=self.config.brokerd_uid, timeout=5)
        except (DaemonUnreachable, trio.TooSlowError):
            status = None
        broker = status if isinstance(status, Status) else None
        loop = self.loop_status = await _loop_status(self.config)
        lines = banner_parts(loop=loop, broker=broker,
                             summary=_grants_line(self.config.home / "grants"),
                             warnings=broker.warnings if broker is not None else ())
        width = terminal_width()
        self.view.show("".join("\n".join(wrap_own(line, width)) + "\n" for line in lines))

    async def interactive(self) -> None:
        view = self.view
        await self.banner()
        with trio.open_signal_receiver(signal.SIGINT) as sigint:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._on_sigint, sigint)
                while True:
                    view.show("you> ")
                    line = await self.reader.readline()
                    if line is None:
                        view.write("\n")
                        break
                    text = line.rstrip("\r\n")
                    if not text.strip():
                        continue
                    if text.strip() == "/help":
                        from ._chat_banner import help_text

                        view.write(help_text(self.loop_status))
                        continue
                    await self.run_turn(text)
                nursery.cancel_scope.cancel()

    async def _on_sigint(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            if self.turn_scope is not None:
                self.turn_scope.cancel()
            else:
                self.view.show("\n(Ctrl-D leaves the chat)\nyou> ")


async def _loop_status(config: BxctlConfig) -> LoopStatus | None:
    """loopd's status (the model's name), or None when it does not answer in 5 s."""
    try:
        with trio.fail_after(5):
            async with open_request(config.loop_socket, LoopStatusRequest(),
                                    loopd_uid=config.loopd_uid) as conn, \
                    contextlib.aclosing(conn.frames()) as frames:
                async for item in frames:
                    if isinstance(item, Undecodable):
                        return None
                    return item[1] if isinstance(item[1], LoopStatus) else None
    except (DaemonUnreachable, trio.TooSlowError):
        return None
    return None


def _grants_line(directory: Path) -> str | None:
    """The grants summed up, None when they cannot be read here (another uid's)."""
    from ..policy._load import GrantsMissing, load_grants
    from ..policy._model import GrantSet
    from ._chat_banner import grants_summary

    try:
        state = load_grants(directory)
    except (GrantsMissing, OSError):
        return None
    if not isinstance(state, GrantSet):
        return "the grant files have problems: every call is refused (bxctl grants check)"
    return grants_summary(state.grants, Path.home())


def _restore_blocking_stdin() -> None:
    """FdStream made the terminal's file description non-blocking; give it back."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        os.set_blocking(sys.stdin.fileno(), True)


def run(config: BxctlConfig, conversation: str) -> None:
    """The interactive chat on this terminal, until end of input."""
    reader = LineReader.for_stdin()
    session = ChatSession(config=config, conversation=conversation,
                          view=ChatView(out=sys.stdout), reader=reader)

    async def main() -> None:
        try:
            await session.interactive()
        finally:
            await reader.aclose()
            _restore_blocking_stdin()

    trio.run(main)
