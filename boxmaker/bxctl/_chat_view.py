"""What `bxctl chat` shows of a turn, frame by frame: shared by `--say` and the chat.

`ChatView` writes each frame of a turn as it arrives (or, with `--json`, the
frame itself as one JSON line), keeps the row in progress (model text, a
question) so that boxmaker's own lines start at column 0, and says what went
wrong as a notice.  It does no socket I/O and knows no trio: `bxctl chat
--say` drives it from the blocking loop.sock link (`_chat_say`), the
interactive chat from trio (`_chat_session`), so both show the same turn the
same way.
"""

from __future__ import annotations

from typing import TextIO

import attrs

from .._error_table import ERROR_RUNBOOKS
from ..proto._json import dumps_terminal
from ..proto.wire import (
    ApprovalPendingEvent,
    Done,
    ErrorAnswer,
    LoopFrame,
    NoticeEvent,
    TextEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
)
from . import _chat_render as render
from ._admin_client import DaemonUnreachable
from ._screen import ModelText, terminal_width

BAD_FRAME_RUNBOOK = ERROR_RUNBOOKS["bad_frame"]


def single(exc: Exception) -> Exception:
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


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@attrs.define
class ChatView:
    out: TextIO
    as_json: bool = False
    notices: TextIO | None = None
    """Where bxctl's own notices go (None: `out`, in the flow of the chat)."""
    text: ModelText = attrs.field(factory=ModelText)
    asked: bool = False
    """The approval question is on screen, its row not ended by the owner's Enter."""

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def row_end(self) -> str:
        """What ends the row in progress (model text, or a question), for column 0."""
        ending = self.text.close()
        if self.asked:
            self.asked = False
            ending = "\n"
        return ending

    def show(self, text: str) -> None:
        """boxmaker's own lines: the row in progress is ended first (column 0)."""
        self.write(self.row_end() + text)

    def notice(self, message: str) -> None:
        """Something went wrong in this turn: said escaped, and the chat goes on."""
        line = render.problem(f"bxctl: {message}", terminal_width())
        if self.notices is None:
            self.show(line)
        else:
            self.write(self.row_end())
            self.notices.write(line)
            self.notices.flush()

    def undecodable(self, reason: str) -> None:
        self.notice(f"loopd sent a frame that bxctl could not decode "
                    f"({reason}); it was skipped. See {BAD_FRAME_RUNBOOK}")

    def closed_early(self) -> None:
        self.notice("loopd closed the connection before the turn ended; "
                    "`bxctl chat` shows the conversation")

    def frame(self, raw: dict[str, object], frame: LoopFrame) -> bool | None:
        """Show one frame of the turn: True at `done`, False at an error answer (the
        turn is over), None while it goes on."""
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
        if not self.as_json:
            self._show(frame)
        return None

    def _show(self, frame: LoopFrame) -> None:
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
        elif isinstance(frame, ToolDeniedEvent):
            self.show(render.tool_denied(frame, width))
        elif isinstance(frame, ToolResultEvent):
            self.show(render.tool_result(frame, width))
        elif isinstance(frame, NoticeEvent):
            self.show(render.notice(frame, width))
