"""`bxctl chat [--conversation NAME] [--say TEXT] [--json]` (07-bxctl).

Interactive by default: one reader owns stdin for the whole session (the chat
line and the approval question come from the same reader); the model's text
is shown as it arrives; tool calls and their outcomes as they happen.  On
`approval_pending` the whole approval is fetched by id from brokerd and shown;
the owner approves by typing its id, `r` refuses, Enter leaves it pending.
Ctrl-C during a turn cancels the turn (closing the connection makes loopd
cancel it); only end of input ends the session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import attrs
import click
import trio

from .._error_table import ERROR_RUNBOOKS
from ..proto._json import dumps_terminal
from ..proto.wire import (
    Approval,
    ApprovalPendingEvent,
    ApprovalRequest,
    ApproveRequest,
    Done,
    ErrorAnswer,
    LoopStatus,
    LoopStatusRequest,
    NoticeEvent,
    RefuseRequest,
    SayRequest,
    Status,
    StatusRequest,
    TextEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
    is_name,
)
from . import _chat_render as render
from ._admin_client import DaemonUnreachable, request_async
from ._app import App, pass_app, text_arg
from ._config import BxctlConfig
from ._loop_client import LoopConnection, Undecodable, open_request
from ._screen import ModelText, terminal_width, wrap_own


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


BAD_FRAME_RUNBOOK = ERROR_RUNBOOKS["bad_frame"]


def _single(exc: Exception) -> Exception:
    """A group of DaemonUnreachable (from a nursery) as its first; anything else as is."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        item = pending.pop(0)
        if isinstance(item, BaseExceptionGroup):
            pending[:0] = list(item.exceptions)
        else:
            leaves.append(item)
    if leaves and all(isinstance(leaf, DaemonUnreachable) for leaf in leaves):
        first = leaves[0]
        assert isinstance(first, DaemonUnreachable)
        return first
    return exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@attrs.define
class ChatSession:
    config: BxctlConfig
    conversation: str
    out: TextIO
    reader: LineReader | None
    """None for --say: nothing is asked."""
    as_json: bool = False
    notices: TextIO | None = None
    """Where bxctl's own notices go (None: `out`, in the flow of the chat)."""
    turn_scope: trio.CancelScope | None = None
    text: ModelText = attrs.field(factory=ModelText)
    asked: bool = False
    """The approval question is on screen, its row not ended by the owner's Enter."""

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _row_end(self) -> str:
        """What ends the row in progress (model text, or a question), for column 0."""
        ending = self.text.close()
        if self.asked:
            self.asked = False
            ending = "\n"
        return ending

    def show(self, text: str) -> None:
        """boxmaker's own lines: the row in progress is ended first (column 0)."""
        self.write(self._row_end() + text)

    def notice(self, message: str) -> None:
        """Something went wrong in this turn: said escaped, and the chat goes on."""
        line = render.problem(f"bxctl: {message}", terminal_width())
        if self.notices is None:
            self.show(line)
        else:
            self.write(self._row_end())
            self.notices.write(line)
            self.notices.flush()

    async def run_turn(self, text: str) -> bool:
        """One turn; True when it ended with `done`.  A failure of the turn is said
        and returns False (with --say, an unreachable loopd is raised: exit 3)."""
        ok = False
        with trio.CancelScope() as scope:
            self.turn_scope = scope
            try:
                ok = await self._turn(text)
            except Exception as exc:  # noqa: BLE001 - a failed turn never ends the chat
                error = _single(exc)
                if isinstance(error, DaemonUnreachable):
                    if self.reader is None:
                        self.write(self._row_end())
                        raise error from None
                    self.notice(error.format_message())
                else:
                    self.notice(f"the turn failed here ({_describe(error)})")
            finally:
                self.turn_scope = None
        if scope.cancelled_caught:
            self.show("(turn cancelled)\n")
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
        async for item in conn.frames():
            if isinstance(item, Undecodable):
                self.notice(f"loopd sent a frame that bxctl could not decode "
                            f"({item.reason}); it was skipped. See {BAD_FRAME_RUNBOOK}")
                continue
            raw, frame = item
            if self.as_json:
                self.write(dumps_terminal(raw) + "\n")
            if isinstance(frame, Done):
                if not self.as_json:
                    self.show(render.done(frame))
                return True
            if isinstance(frame, ErrorAnswer):
                if not self.as_json:
                    self.show(render.error(frame, terminal_width()))
                return False
            if isinstance(frame, (ToolDeniedEvent, ToolResultEvent)):
                moot = asking.pop(frame.call_id, None)
                if moot is not None:
                    moot.cancel()
            if not self.as_json:
                await self._show(frame, questions, asking)
        self.notice("loopd closed the connection before the turn ended; "
                    "`bxctl chat` shows the conversation")
        return False

    async def _show(self, frame: Any, questions: trio.Nursery,
                    asking: dict[str, trio.CancelScope]) -> None:
        width = terminal_width()
        if isinstance(frame, TextEvent):
            # (a question on screen: a loopd that sends text now gets a row of its own)
            question_row = "\n" if self.asked else ""
            self.asked = False
            self.write(question_row + self.text.feed_text(frame.delta, width))
        elif isinstance(frame, ToolCallEvent):
            self.show(render.tool_call(frame, width))
        elif isinstance(frame, ApprovalPendingEvent):
            self.show(render.approval_pending(frame, width))
            scope = trio.CancelScope()
            asking[frame.call_id] = scope
            questions.start_soon(self._ask, frame, scope)
        elif isinstance(frame, ToolDeniedEvent):
            self.show(render.tool_denied(frame, width))
        elif isinstance(frame, ToolResultEvent):
            self.show(render.tool_result(frame, width))
        elif isinstance(frame, NoticeEvent):
            self.show(render.notice(frame, width))

    async def _fetch(self, approval_id: int) -> Approval | None:
        answer = await request_async(self.config.admin_socket,
                                     ApprovalRequest(approval_id=approval_id),  # type: ignore[arg-type]
                                     brokerd_uid=self.config.brokerd_uid)
        if isinstance(answer, Approval):
            return answer
        if isinstance(answer, ErrorAnswer):
            self.notice(f"approval {approval_id}: {answer.message}")
        return None

    async def _ask(self, event: ApprovalPendingEvent, scope: trio.CancelScope) -> None:
        with scope:
            try:
                approval = await self._fetch(event.approval_id)
            except DaemonUnreachable as exc:
                self.notice(exc.format_message())
                return
            if approval is None:
                return
            from ._admin_cmd import render_approval  # only when a call waits for approval

            block = render_approval(approval, width=terminal_width())
            self.show("\n".join(block) + "\n")
            if self.reader is None:
                self.show(f"approve it with: bxctl approve {approval.approval_id}\n")
                return
            self.show("\n".join(wrap_own([(f"type {approval.approval_id} to approve, r to "
                                            "refuse, or Enter to leave it pending: ", False)],
                                          terminal_width())))
            self.asked = True
            line = await self.reader.readline()
            self.asked = False  # the owner's Enter ended the row
            await self._answer(approval.approval_id, (line or "").strip())

    async def _answer(self, approval_id: int, typed: str) -> None:
        if typed == "":
            self.show(f"left pending; answer later with bxctl approve {approval_id}\n")
            return
        body: ApproveRequest | RefuseRequest
        if typed == str(approval_id):
            body, done_word = ApproveRequest(approval_id=approval_id), "approved"  # type: ignore[arg-type]
        elif typed.lower() == "r":
            body, done_word = RefuseRequest(approval_id=approval_id, reason=None), "refused"  # type: ignore[arg-type]
        else:
            self.show(f"that is not approval {approval_id}'s id; it stays pending\n")
            return
        try:
            answer = await request_async(self.config.admin_socket, body,
                                         brokerd_uid=self.config.brokerd_uid)
        except DaemonUnreachable as exc:
            self.notice(exc.format_message())
            return
        if isinstance(answer, ErrorAnswer):
            self.notice(f"approval {approval_id}: {answer.message}")
        else:
            self.show(f"{done_word} {approval_id}\n")

    async def banner(self) -> None:
        from ._chat_banner import banner_parts  # the interactive chat's: --say has no banner

        self.write("\n".join(wrap_own([(f"boxmaker chat · conversation {self.conversation} · "
                                         "Ctrl-D leaves, Ctrl-C cancels a turn", False)],
                                       terminal_width())) + "\n")
        status: object = None
        try:
            with trio.fail_after(5):
                status = await request_async(self.config.admin_socket, StatusRequest(),
                                             brokerd_uid=self.config.brokerd_uid, timeout=5)
        except (DaemonUnreachable, trio.TooSlowError):
            status = None
        broker = status if isinstance(status, Status) else None
        loop = await _loop_status(self.config)
        lines = banner_parts(loop=loop, broker=broker,
                             summary=_grants_line(self.config.home / "grants"),
                             warnings=broker.warnings if broker is not None else ())
        width = terminal_width()
        self.show("".join("\n".join(wrap_own(line, width)) + "\n" for line in lines))

    async def interactive(self) -> None:
        assert self.reader is not None
        await self.banner()
        with trio.open_signal_receiver(signal.SIGINT) as sigint:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._on_sigint, sigint)
                while True:
                    self.show("you> ")
                    line = await self.reader.readline()
                    if line is None:
                        self.write("\n")
                        break
                    text = line.rstrip("\r\n")
                    if not text.strip():
                        continue
                    if text.strip() == "/help":
                        from ._chat_banner import HELP

                        self.write(HELP)
                        continue
                    try:
                        await self.run_turn(text)
                    except DaemonUnreachable as exc:
                        self.write(f"{exc.format_message()}\n")
                nursery.cancel_scope.cancel()

    async def _on_sigint(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            if self.turn_scope is not None:
                self.turn_scope.cancel()
            else:
                self.show("\n(Ctrl-D leaves the chat)\nyou> ")


async def _loop_status(config: BxctlConfig) -> LoopStatus | None:
    """loopd's status (the model's name), or None when it does not answer in 5 s."""
    try:
        with trio.fail_after(5):
            async with open_request(config.loop_socket, LoopStatusRequest(),
                                    loopd_uid=config.loopd_uid) as conn:
                async for item in conn.frames():
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


@click.command()
@click.option("--conversation", default="default", show_default=True,
              help="The conversation (also brokerd's session): [a-z0-9][a-z0-9-]{0,63}.")
@click.option("--say", "say_text", default=None, metavar="TEXT",
              help="Send one message, print the turn, and exit (1 if the turn failed).")
@click.option("--json", "as_json", is_flag=True,
              help="With --say: print every loop.sock frame as a JSON line.")
@pass_app
def chat(app: App, conversation: str, say_text: str | None, as_json: bool) -> None:
    """Talk to the agent; approve its calls by typing their ids."""
    text_arg(conversation, "--conversation")
    if not is_name(conversation):
        raise click.UsageError("--conversation must match [a-z0-9][a-z0-9-]{0,63}")
    if say_text is not None:
        text_arg(say_text, "--say")
    if as_json and say_text is None:
        raise click.UsageError("--json needs --say: an interactive chat has no JSON form")
    if say_text is not None and not say_text.strip():
        raise click.UsageError("--say needs some text")
    config = app.config
    if say_text is not None:
        session = ChatSession(config=config, conversation=conversation,
                              out=sys.stdout, reader=None,
                              as_json=as_json, notices=sys.stderr)
        ok = trio.run(session.run_turn, say_text)
        sys.exit(0 if ok else 1)
    reader = LineReader.for_stdin()
    session = ChatSession(config=config, conversation=conversation,
                          out=sys.stdout, reader=reader)

    async def main() -> None:
        try:
            await session.interactive()
        finally:
            await reader.aclose()
            _restore_blocking_stdin()

    trio.run(main)
