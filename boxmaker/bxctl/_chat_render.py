"""How `bxctl chat` shows a turn: everything from the model, tools and servers escaped."""

from __future__ import annotations

from ..proto._escape import escape_line, escape_text
from ..proto._json import dumps
from ..proto._wire import ErrorAnswer
from ..proto._wire_loop import (
    ApprovalPendingEvent,
    Done,
    TextEvent,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
)

ARGS_SHOWN = 200
"""Tool-call lines show at most this many characters of arguments; the approval
block, which is what the owner decides on, shows them whole."""


def text_delta(event: TextEvent) -> str:
    return escape_text(event.delta)


def tool_call(event: ToolCallEvent) -> str:
    shown = dumps(event.args) if event.args is not None else (event.raw_args or "")
    shown = escape_line(shown)
    if len(shown) > ARGS_SHOWN:
        shown = shown[:ARGS_SHOWN] + f"… ({len(shown)} characters)"
    return f"\n→ {escape_line(event.tool)} {shown}\n"


def approval_pending(event: ApprovalPendingEvent) -> str:
    return f"… {escape_line(event.tool)} waits for approval {event.approval_id}\n"


def tool_denied(event: ToolDeniedEvent) -> str:
    line = f"✗ {escape_line(event.tool)} denied ({event.code}): {escape_line(event.reason)}"
    if event.runbook:
        line += f" [{event.runbook}]"
    return line + "\n"


def tool_result(event: ToolResultEvent) -> str:
    trust = ", untrusted" if event.untrusted else ""
    return (f"✓ {escape_line(event.tool)} {event.status}, {event.bytes} bytes, "
            f"label {event.label}{trust}\n")


def done(event: Done) -> str:
    usage = event.usage
    return (f"\n({event.finish}, {event.rounds} round{'s' if event.rounds != 1 else ''}, "
            f"{usage.prompt_tokens}+{usage.completion_tokens} tokens)\n")


def error(event: ErrorAnswer) -> str:
    line = f"\nerror ({event.code}): {escape_line(event.message)}"
    if event.runbook:
        line += f" [{event.runbook}]"
    return line + "\n"
