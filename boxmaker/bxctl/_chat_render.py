"""How `bxctl chat` shows a turn: everything from the model, tools and servers escaped.

Each function gives boxmaker's own lines (each starting at column 0), with
the untrusted fields escaped and wrapped at `width` (`_screen`); the model's
text itself goes through `_screen.ModelText`, as gutter rows.
"""

from __future__ import annotations

from ..proto._escape import escape_line, escape_text
from ..proto._json import dumps
from ..proto.wire import (
    ApprovalPendingEvent,
    Done,
    ErrorAnswer,
    NoticeEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
)
from ._screen import GUTTER, ModelText, cut, wrap_line

ARGS_SHOWN = 200
"""Tool-call lines show at most this many characters of arguments; the approval
block, which is what the owner decides on, shows them whole."""


def tool_call(event: ToolCallEvent, width: int) -> str:
    shown = dumps(event.args) if event.args is not None else (event.raw_args or "")
    shown = escape_line(shown)
    if len(shown) > ARGS_SHOWN:
        shown = cut(shown, ARGS_SHOWN) + f"\u2026 ({len(shown)} characters)"
    return wrap_line(f"\u2192 {escape_line(event.tool)} {shown}", width) + "\n"


def approval_pending(event: ApprovalPendingEvent, width: int) -> str:
    return wrap_line(f"\u2026 {escape_line(event.tool)} waits for approval "
                     f"{event.approval_id}", width) + "\n"


def tool_denied(event: ToolDeniedEvent, width: int) -> str:
    line = f"\u2717 {escape_line(event.tool)} denied ({event.code}): {escape_line(event.reason)}"
    if event.runbook:
        line += f" [{event.runbook}]"
    return wrap_line(line, width) + "\n"


def tool_result(event: ToolResultEvent, width: int) -> str:
    trust = ", untrusted" if event.untrusted else ""
    code = f", exit {event.exit}" if event.exit is not None else ""
    return wrap_line(f"\u2713 {escape_line(event.tool)} {event.status}{code}, {event.bytes} "
                     f"bytes, label {event.label}{trust}", width) + "\n"


def notice(event: NoticeEvent, width: int) -> str:
    """loopd's own word about the turn; a repeat's earlier output, or a result the
    model's answer left out, as gutter rows."""
    tool = escape_line(event.tool) if event.tool else "the tool"
    if event.kind == "cut_call":
        return wrap_line(f"! {tool}: {escape_line(event.text)}", width) + "\n"
    if event.kind == "result":
        header = wrap_line(f"\u25b8 the answer left out the result of {tool}; "
                           "boxmaker shows it:", width)
    else:
        header = wrap_line(f"\u27f3 {tool} was asked for again with the same arguments; "
                           "not run again. Its earlier outcome:", width)
    rows = ModelText(GUTTER)
    return header + "\n" + rows.feed(escape_text(event.text), width) + rows.close()


def done(event: Done) -> str:
    usage = event.usage
    return (f"({event.finish}, {event.rounds} round{'s' if event.rounds != 1 else ''}, "
            f"{usage.prompt_tokens}+{usage.completion_tokens} tokens)\n")


def error(event: ErrorAnswer, width: int) -> str:
    line = f"error ({event.code}): {escape_line(event.message)}"
    if event.runbook:
        line += f" [{event.runbook}]"
    return wrap_line(line, width) + "\n"


def problem(message: str, width: int) -> str:
    """One of bxctl's own notices (a frame it could not decode, a failed turn)."""
    return wrap_line(escape_line(message), width) + "\n"
