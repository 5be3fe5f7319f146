"""`bxctl approvals|approve|refuse|status|session` (07-bxctl): brokerd's admin.sock.

Exit codes: 0 done; 1 not fine (no such approval or session, brokerd refused);
2 usage; 3 brokerd unreachable or no answer in time.  Everything that came
from the model, a tool or a peer is escaped before the terminal sees it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from .._error_table import condition
from ..proto._convert import U64, U64_MAX, unstructure
from ..proto._escape import escape_line
from ..proto._json import dumps, dumps_terminal
from ..proto._taint import LABELS, Label, Taint
from ..proto.wire import (
    AdminAnswer,
    AdminRequestBody,
    Approval,
    ApprovalList,
    ApprovalsRequest,
    ApproveRequest,
    DeclassifyRequest,
    ErrorAnswer,
    Ok,
    RefuseRequest,
    SessionInfo,
    SessionRequest,
    Status,
    StatusRequest,
    parse_ts,
)
from ._admin_client import DaemonUnreachable, request
from ._app import App, pass_app, text_arg
from ._checkpoint_status import checkpoint_lines
from ._screen import GUTTER, terminal_width, wrap_line, wrap_own, wrap_row

# compiled when an argument is checked (re's cache), not for every command of the module
_ID = r"0|[1-9][0-9]*"
_SESSION = r"[a-z0-9][a-z0-9-]{0,63}"


class ApprovalId(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A decimal u64: no sign, no leading zeros, no spaces."""

    name = "ID"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value)
        if re.fullmatch(_ID, text, re.ASCII) is None or int(text) > U64_MAX:
            self.fail("an approval id is a decimal number with no sign, leading zeros or "
                      "spaces", param, ctx)
        return int(text)



def _session_name(value: str) -> str:
    text_arg(value, "SESSION")
    if re.fullmatch(_SESSION, value, re.ASCII) is None:
        raise click.UsageError("SESSION is a name of [a-z0-9][a-z0-9-]{0,63}")
    return value


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(wrap_line(f"bxctl: {escape_line(message)}", terminal_width()), err=True)
    click.get_current_context().exit(code)


def _ask(app: App, body: AdminRequestBody) -> AdminAnswer:
    config = app.config
    return request(config.admin_socket, body, brokerd_uid=config.brokerd_uid)


def _refused(answer: ErrorAnswer) -> NoReturn:
    message = answer.message
    if answer.runbook and answer.runbook not in message:
        message = f"{message}. See {answer.runbook}"
    _fail(f"brokerd: {message}")


def _expect(answer: AdminAnswer, kind: type[Any]) -> Any:
    if isinstance(answer, ErrorAnswer):
        _refused(answer)
    if not isinstance(answer, kind):
        _fail(f"brokerd answered {type(answer).__name__} to this request")
    return answer


def _json(value: Any) -> None:
    click.echo(dumps_terminal(value))


# -- rendering ---------------------------------------------------------------------


def _in(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds <= 0:
        return "due now"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"in {hours}h{minutes:02d}m"
    if minutes:
        return f"in {minutes}m{secs:02d}s"
    return f"in {secs}s"


def _value(value: Any) -> str:
    return escape_line(value if isinstance(value, str) else dumps(value))


def render_approval(approval: Approval, now: dt.datetime | None = None,
                    width: int | None = None, grants: Path | None = None) -> list[str]:
    """The approval block of 07-bxctl (without the question): boxmaker's rows at
    column 0, every field escaped and wrapped at `width` behind a gutter.  `grants`:
    the grants directory a run_command block reads its mounts from."""
    now = now or dt.datetime.now(dt.UTC)
    width = width or terminal_width()
    expires = parse_ts(approval.expires_at)
    local = expires.astimezone()
    trust = "untrusted" if approval.state.untrusted else "trusted"
    value_indent = " " * len(_FIELD_HEAD) + GUTTER
    lines = [
        *wrap_own([(f"approval {approval.approval_id} · expires {local:%H:%M:%S} "
                    f"({_in(expires - now)})", False)], width, _FIELD_HEAD),
        *wrap_row("  tool     ", escape_line(approval.tool), width, value_indent),
        *wrap_row("  grant    ", escape_line(approval.grant) + " (ask)", width, value_indent),
        *wrap_own([(f"  session  {approval.session} · label {approval.state.label} "
                    f"· {trust}", False)], width, _FIELD_HEAD),
    ]
    from ..proto.tools import CATALOGUE  # the catalogue: when an approval is shown

    entry = CATALOGUE.get(approval.tool)
    block = _BLOCKS.get(entry.approval if entry is not None else "args", _arg_rows)
    return lines + block(approval, width, value_indent, grants)


def _arg_rows(approval: Approval, width: int, value_indent: str,
              grants: Path | None = None) -> list[str]:
    """The `args` block: one row per argument, in key order, each value escaped."""
    args = approval.args
    lines = [] if args else ["  args     (none)"]
    keys = {key: escape_line(key) for key in args}
    key_width = max((len(k) for k in keys.values()), default=0)
    for index, key in enumerate(sorted(args)):
        head = "  args     " if index == 0 else _FIELD_HEAD
        lines += wrap_row(head, f"{keys[key].ljust(key_width)}  {_value(args[key])}", width,
                          value_indent)
    return lines


def _command_rows(approval: Approval, width: int, value_indent: str,
                  grants: Path | None = None) -> list[str]:
    """The `command` block (run_command): argv one token per line, quoted and escaped,
    then cwd, each mount with ro/rw and "network: none" (`command_block_rows`).  The
    mounts are the ask grant's `paths`, which the approval does not carry: they are
    read from the grant files in `grants` (`command_mounts`); when that cannot be
    done the block names the grant whose paths they are.  Arguments that are not a
    valid run_command call (never asked by brokerd) are shown as `args`."""
    from .._grant_mounts import command_mounts
    from ..proto.tools import command_approval_rows  # the catalogue: when shown

    mounts = None if grants is None else command_mounts(grants, approval.grant)
    rows = command_approval_rows(approval.args, approval.grant, mounts)
    if rows is None:
        return _arg_rows(approval, width, value_indent)
    field_width = max(len(field) for field, _ in rows)
    lines: list[str] = []
    for field, value in rows:
        lines += wrap_row("  " + field.ljust(field_width) + "  ", value, width, value_indent)
    return lines


_FIELD_HEAD = " " * len("  args     ")
_BLOCKS: dict[str, Callable[[Approval, int, str, Path | None], list[str]]] = {
    "args": _arg_rows, "command": _command_rows}
"""How each catalogue `approval` block is shown."""


def _status_lines(status: Status) -> list[str]:
    audit = status.audit
    grants = status.grants
    runner = status.runner
    lines = [
        f"brokerd {escape_line(status.version)}",
        f"audit    {'ok' if audit.ok else 'UNAVAILABLE'} · head {audit.head_seq} "
        f"{audit.head_hash[:12]}",
        f"grants   {'ok' if grants.ok else 'INVALID'} · {grants.count} grants · "
        f"digest {grants.digest[:12]}",
        f"runner   {runner.kind} · {'ok' if runner.ok else 'unavailable'}"
        + (f" · {escape_line(runner.image)}" if runner.image else "")
        + (f" · {escape_line(runner.reason)}" if runner.reason else ""),
        f"sources  {'ok' if status.sources.ok else 'INVALID'} · {status.sources.count} MCP "
        f"servers · {status.sources.pinned} pinned, {status.sources.unpinned} unpinned · "
        f"digest {status.sources.digest[:12]}",
        f"pending  {status.pending}",
        f"sessions {status.sessions}",
    ]
    lines += checkpoint_lines(status.checkpoints, dt.datetime.now(dt.UTC))
    lines += [f"warning: {escape_line(w)}" for w in status.warnings]
    return lines


def _session_line(info: SessionInfo) -> str:
    trust = "untrusted" if info.untrusted else "trusted"
    return f"session {info.session} · label {info.label} · {trust} · seq {info.seq}"


# -- commands --------------------------------------------------------------------------


@click.command("approvals")
@click.option("--json", "as_json", is_flag=True, help="Print {\"items\": [Approval, ...]}.")
@pass_app
def approvals(app: App, as_json: bool) -> None:
    """List pending approvals, oldest first."""
    answer: ApprovalList = _expect(_ask(app, ApprovalsRequest()), ApprovalList)
    if as_json:
        _json(unstructure(answer, ApprovalList))
        return
    if not answer.items:
        click.echo("no pending approvals")
        return
    now = dt.datetime.now(dt.UTC)
    width = terminal_width()
    for index, approval in enumerate(answer.items):
        if index:
            click.echo("")
        click.echo("\n".join(render_approval(approval, now, width, app.config.grants)))


@click.command("approve")
@click.argument("approval_id", metavar="ID", type=ApprovalId())
@pass_app
def approve(app: App, approval_id: int) -> None:
    """Approve the pending call ID (the call then runs, if still allowed)."""
    _expect(_ask(app, ApproveRequest(approval_id=U64(approval_id))), Ok)
    click.echo(f"approved {approval_id}")


@click.command("refuse")
@click.argument("approval_id", metavar="ID", type=ApprovalId())
@click.option("--reason", default=None, help="Why (recorded in the audit log).")
@pass_app
def refuse(app: App, approval_id: int, reason: str | None) -> None:
    """Refuse the pending call ID."""
    if reason is not None:
        text_arg(reason, "--reason")
    _expect(_ask(app, RefuseRequest(approval_id=U64(approval_id), reason=reason)), Ok)
    click.echo(f"refused {approval_id}")


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the Status object.")
@pass_app
def status(app: App, as_json: bool) -> None:
    """brokerd's audit log, grants, runner, pending approvals and warnings."""
    answer: Status = _expect(_ask(app, StatusRequest()), Status)
    if as_json:
        _json(unstructure(answer, Status))
        return
    width = terminal_width()
    click.echo("\n".join(wrap_line(line, width) for line in _status_lines(answer)))


@click.group("session")
def session() -> None:
    """Show or lower a session's taint."""


@session.command("show")
@click.argument("name", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="Print the session object.")
@pass_app
def session_show(app: App, name: str, as_json: bool) -> None:
    """A session's taint: from brokerd, or from the state files when it is not running."""
    name = _session_name(name)
    try:
        answer = _ask(app, SessionRequest(session=name))
    except DaemonUnreachable as exc:
        if exc.sent:
            raise
        _show_offline(app, name, as_json, exc)
        return
    info: SessionInfo = _expect(answer, SessionInfo)
    if as_json:
        _json(unstructure(info, SessionInfo))
    else:
        click.echo(_session_line(info))


def _show_offline(app: App, name: str, as_json: bool, why: DaemonUnreachable) -> None:
    click.echo(f"bxctl: {why.format_message()}", err=True)
    click.echo("bxctl: brokerd is not running: showing the state file, a cache of the "
               "audit log (`brokerd rebuild-state` recomputes it)", err=True)
    from .._session_state import read_state  # only without brokerd

    state = read_state(app.config.state / "sessions", name, head_seq=U64_MAX)
    if state is None:
        _fail(f"no state file for session {name}")
    if state.problem is not None:
        _fail(f"the state file of session {name} is {state.problem} ({state.detail}); brokerd "
              f"uses it as secret + untrusted. See {condition('broker_state_damaged')}")
    info = SessionInfo(session=name, label=state.taint.label, untrusted=state.taint.untrusted,
                       seq=U64(state.seq))
    if as_json:
        _json(unstructure(info, SessionInfo))
    else:
        click.echo(_session_line(info) + " (from the state file)")


@session.command("declassify")
@click.argument("name", metavar="SESSION")
@click.option("--label", type=click.Choice(LABELS), default=None,
              help="The new label (default: keep the current one).")
@click.option("--trusted", is_flag=True, help="Clear the untrusted flag.")
@click.option("--reason", required=True, help="Why (recorded in the audit log).")
@pass_app
def session_declassify(app: App, name: str, label: Label | None, trusted: bool,
                       reason: str) -> None:
    """Lower a session's taint (recorded); it can never be raised this way."""
    name = _session_name(name)
    text_arg(reason, "--reason")
    current: SessionInfo = _expect(_ask(app, SessionRequest(session=name)), SessionInfo)
    to = Taint(label=label or current.label, untrusted=False if trusted else current.untrusted)
    _expect(_ask(app, DeclassifyRequest(session=name, label=to.label, untrusted=to.untrusted,
                                        reason=reason)), Ok)
    trust = "untrusted" if to.untrusted else "trusted"
    click.echo(f"session {name}: {current.label}{' untrusted' if current.untrusted else ''}"
               f" -> {to.label} {trust}")


COMMANDS = (approvals, approve, refuse, status, session)
