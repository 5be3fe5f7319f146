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

from ..policy._load import GrantsMissing, load_grants
from ..policy._model import GrantSet
from ..proto._escape import escape_line
from ..proto._json import dumps
from ..proto._wire import ErrorAnswer, is_name
from ..proto._wire_admin import (
    Approval,
    ApprovalRequest,
    ApproveRequest,
    RefuseRequest,
    Status,
    StatusRequest,
)
from ..proto._wire_loop import (
    ApprovalPendingEvent,
    Done,
    LoopStatus,
    LoopStatusRequest,
    SayRequest,
    TextEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
)
from . import _chat_render as render
from ._admin_client import DaemonUnreachable, request_async
from ._admin_cmd import render_approval
from ._chat_banner import HELP, banner_lines, grants_summary
from ._cli import App, pass_app, text_arg
from ._config import BxctlConfig
from ._loop_client import open_request


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
    out: TextIO
    reader: LineReader | None
    """None for --say: nothing is asked."""
    as_json: bool = False
    turn_scope: trio.CancelScope | None = None

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def run_turn(self, text: str) -> bool:
        """One turn; True when it ended with `done`."""
        ok = False
        with trio.CancelScope() as scope:
            self.turn_scope = scope
            try:
                ok = await self._turn(text)
            finally:
                self.turn_scope = None
        if scope.cancelled_caught:
            self.write("\n(turn cancelled)\n")
        return ok

    async def _turn(self, text: str) -> bool:
        ok = False
        say = SayRequest(conversation=self.conversation, text=text)
        async with open_request(self.config.loop_socket, say,
                                loopd_uid=self.config.loopd_uid) as conn, \
                trio.open_nursery() as questions:
            asking: dict[str, trio.CancelScope] = {}
            async for raw, frame in conn.frames():
                if self.as_json:
                    self.write(dumps(raw, ascii_only=True) + "\n")
                if isinstance(frame, Done):
                    ok = True
                    if not self.as_json:
                        self.write(render.done(frame))
                    break
                if isinstance(frame, ErrorAnswer):
                    if not self.as_json:
                        self.write(render.error(frame))
                    break
                if isinstance(frame, (ToolDeniedEvent, ToolResultEvent)):
                    moot = asking.pop(frame.call_id, None)
                    if moot is not None:
                        moot.cancel()
                if not self.as_json:
                    await self._show(frame, questions, asking)
            questions.cancel_scope.cancel()
        return ok

    async def _show(self, frame: Any, questions: trio.Nursery,
                    asking: dict[str, trio.CancelScope]) -> None:
        if isinstance(frame, TextEvent):
            self.write(render.text_delta(frame))
        elif isinstance(frame, ToolCallEvent):
            self.write(render.tool_call(frame))
        elif isinstance(frame, ApprovalPendingEvent):
            self.write(render.approval_pending(frame))
            scope = trio.CancelScope()
            asking[frame.call_id] = scope
            questions.start_soon(self._ask, frame, scope)
        elif isinstance(frame, ToolDeniedEvent):
            self.write(render.tool_denied(frame))
        elif isinstance(frame, ToolResultEvent):
            self.write(render.tool_result(frame))

    async def _fetch(self, approval_id: int) -> Approval | None:
        answer = await request_async(self.config.admin_socket,
                                     ApprovalRequest(approval_id=approval_id),  # type: ignore[arg-type]
                                     brokerd_uid=self.config.brokerd_uid)
        if isinstance(answer, Approval):
            return answer
        if isinstance(answer, ErrorAnswer):
            self.write(f"approval {approval_id}: {escape_line(answer.message)}\n")
        return None

    async def _ask(self, event: ApprovalPendingEvent, scope: trio.CancelScope) -> None:
        with scope:
            try:
                approval = await self._fetch(event.approval_id)
            except DaemonUnreachable as exc:
                self.write(f"{exc.message}\n")
                return
            if approval is None:
                return
            self.write("\n".join(render_approval(approval)) + "\n")
            if self.reader is None:
                self.write(f"approve it with: bxctl approve {approval.approval_id}\n")
                return
            self.write(f"type {approval.approval_id} to approve, r to refuse, "
                       "or Enter to leave it pending: ")
            line = await self.reader.readline()
            await self._answer(approval.approval_id, (line or "").strip())

    async def _answer(self, approval_id: int, typed: str) -> None:
        if typed == "":
            self.write(f"left pending; answer later with bxctl approve {approval_id}\n")
            return
        body: ApproveRequest | RefuseRequest
        if typed == str(approval_id):
            body, done_word = ApproveRequest(approval_id=approval_id), "approved"  # type: ignore[arg-type]
        elif typed.lower() == "r":
            body, done_word = RefuseRequest(approval_id=approval_id, reason=None), "refused"  # type: ignore[arg-type]
        else:
            self.write(f"that is not approval {approval_id}'s id; it stays pending\n")
            return
        try:
            answer = await request_async(self.config.admin_socket, body,
                                         brokerd_uid=self.config.brokerd_uid)
        except DaemonUnreachable as exc:
            self.write(f"{exc.message}\n")
            return
        if isinstance(answer, ErrorAnswer):
            self.write(f"approval {approval_id}: {escape_line(answer.message)}\n")
        else:
            self.write(f"{done_word} {approval_id}\n")

    async def banner(self) -> None:
        self.write(f"boxmaker chat · conversation {self.conversation} · "
                   "Ctrl-D leaves, Ctrl-C cancels a turn\n")
        status: object = None
        try:
            with trio.fail_after(5):
                status = await request_async(self.config.admin_socket, StatusRequest(),
                                             brokerd_uid=self.config.brokerd_uid, timeout=5)
        except (DaemonUnreachable, trio.TooSlowError):
            status = None
        broker = status if isinstance(status, Status) else None
        loop = await _loop_status(self.config)
        lines = banner_lines(loop=loop, broker=broker,
                             summary=_grants_line(self.config.home / "grants"))
        if broker is not None:
            lines[-1:-1] = [f"warning: {escape_line(w)}" for w in broker.warnings]
        self.write("".join(f"{line}\n" for line in lines))

    async def interactive(self) -> None:
        assert self.reader is not None
        await self.banner()
        with trio.open_signal_receiver(signal.SIGINT) as sigint:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._on_sigint, sigint)
                while True:
                    self.write("you> ")
                    line = await self.reader.readline()
                    if line is None:
                        self.write("\n")
                        break
                    text = line.rstrip("\r\n")
                    if not text.strip():
                        continue
                    if text.strip() == "/help":
                        self.write(HELP)
                        continue
                    try:
                        await self.run_turn(text)
                    except DaemonUnreachable as exc:
                        self.write(f"{exc.message}\n")
                nursery.cancel_scope.cancel()

    async def _on_sigint(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            if self.turn_scope is not None:
                self.turn_scope.cancel()
            else:
                self.write("\n(Ctrl-D leaves the chat)\nyou> ")


async def _loop_status(config: BxctlConfig) -> LoopStatus | None:
    """loopd's status (the model's name), or None when it does not answer in 5 s."""
    try:
        with trio.fail_after(5):
            async with open_request(config.loop_socket, LoopStatusRequest(),
                                    loopd_uid=config.loopd_uid) as conn:
                async for _, frame in conn.frames():
                    return frame if isinstance(frame, LoopStatus) else None
    except (DaemonUnreachable, trio.TooSlowError):
        return None
    return None


def _grants_line(directory: Path) -> str | None:
    """The grants summed up, None when they cannot be read here (another uid's)."""
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
                              as_json=as_json)
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
