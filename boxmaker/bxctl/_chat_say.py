"""`bxctl chat --say TEXT`: one turn over the blocking loop.sock link, with no trio.

The turn is shown as it arrives (`ChatView`, as the interactive chat shows
it).  A call that waits for approval is fetched whole from brokerd's
admin.sock when its `approval_pending` arrives, shown, and left pending with
the command that approves it: nothing is asked.  Exit 0 when the turn ended
with `done`, 1 when it failed, 3 when loopd could not be reached or broke off
(DaemonUnreachable); Ctrl-C closes the connection, which cancels the turn.
"""

from __future__ import annotations

import sys

from ..proto.wire import ApprovalPendingEvent, SayRequest
from ._admin_client import DaemonUnreachable
from ._chat_view import ChatView, describe
from ._config import BxctlConfig
from ._loop_client import Undecodable, open_request
from ._screen import terminal_width


def say(config: BxctlConfig, conversation: str, text: str, *, as_json: bool) -> bool:
    """One turn; True when it ended with `done`.  A failure of the turn is said on
    stderr and returns False; an unreachable loopd is raised (exit 3)."""
    view = ChatView(out=sys.stdout, as_json=as_json, notices=sys.stderr)
    try:
        return _turn(view, config, SayRequest(conversation=conversation, text=text))
    except DaemonUnreachable:
        view.write(view.row_end())
        raise
    except Exception as exc:  # noqa: BLE001 - a failed turn is said, not a traceback
        view.notice(f"the turn failed here ({describe(exc)})")
        return False


def _turn(view: ChatView, config: BxctlConfig, request: SayRequest) -> bool:
    with open_request(config.loop_socket, request, loopd_uid=config.loopd_uid) as link:
        for item in link.frames():
            if isinstance(item, Undecodable):
                view.undecodable(item.reason)
                continue
            raw, frame = item
            ended = view.frame(raw, frame)
            if ended is not None:
                return ended
            if isinstance(frame, ApprovalPendingEvent) and not view.as_json:
                _show_approval(view, config, frame.approval_id)
    view.closed_early()
    return False


def _show_approval(view: ChatView, config: BxctlConfig, approval_id: int) -> None:
    """The pending approval, whole, and how to approve it (only when a call waits)."""
    from ..proto.wire import Approval, ApprovalRequest, ErrorAnswer
    from ._admin_client import request
    from ._admin_cmd import render_approval

    try:
        answer = request(config.admin_socket,
                         ApprovalRequest(approval_id=approval_id),  # type: ignore[arg-type]
                         brokerd_uid=config.brokerd_uid)
    except DaemonUnreachable as exc:
        view.notice(exc.format_message())
        return
    if isinstance(answer, ErrorAnswer):
        view.notice(f"approval {approval_id}: {answer.message}")
    if not isinstance(answer, Approval):
        return
    block = render_approval(answer, width=terminal_width(), grants=config.grants)
    view.show("\n".join(block) + "\n")
    view.show(f"approve it with: bxctl approve {answer.approval_id}\n")
