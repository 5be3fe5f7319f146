"""`bxctl mcp list|show|pin|unpin|restart` (12-tool-sources "bxctl"): brokerd's
admin.sock for MCP servers.

`pin` probes the server (brokerd runs it once), shows everything the probe
found, never truncated, and asks; a non-empty `invalidates` is a second
question.  `--yes` skips the question only when nothing changed from the
current pin and nothing is invalidated.  Everything the server sent (names,
descriptions, schemas, annotations, its self-reported name) is escaped and
shown behind a gutter, as approvals are; annotations are claims, shown as
"the server says".  `show` lists each offered tool as the model sees it
(`mcp_status` naming the server: model name, description, parameters, with
the kinds and egress brokerd derives), escaped and never cut.  Under
`[approvals] require_passkey` the yes prints a one-time link to the approval
page's pin page instead (`mcp_pin_link`), where the passkey signs the pin.
Exit codes: 0 done (pinned, or the signing link printed); 1 declined, the probe
failed, nothing to pin, or brokerd refused; 2 usage; 3 brokerd unreachable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from .._probe_rows import HEAD, Row, probe_rows, tool_rows
from ..proto._convert import unstructure
from ..proto._escape import escape_line
from ..proto._json import dumps, dumps_terminal
from ..proto.wire import (
    AdminAnswer,
    AdminRequestBody,
    Enrolment,
    ErrorAnswer,
    Invalidated,
    McpPinLinkRequest,
    McpPinRequest,
    McpProbeAnswer,
    McpProbeRequest,
    McpRestartRequest,
    McpServerView,
    McpStatusAnswer,
    McpStatusRequest,
    McpUnpinRequest,
    OfferedToolView,
    Ok,
    PasskeyList,
    PasskeysRequest,
    ProbedTool,
)
from ._admin_client import request
from ._app import App, pass_app, text_arg
from ._mcp_group import mcp
from ._passkey_cmd import show_link
from ._screen import GUTTER, terminal_width, wrap_line, wrap_row

_VALUE = HEAD + GUTTER


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(wrap_line(f"bxctl: {escape_line(message)}", terminal_width()), err=True)
    click.get_current_context().exit(code)


def _ask(app: App, body: AdminRequestBody, timeout: float = 30.0) -> AdminAnswer:
    config = app.config
    return request(config.admin_socket, body, brokerd_uid=config.brokerd_uid, timeout=timeout)


def _expect(answer: AdminAnswer, kind: type[Any]) -> Any:
    if isinstance(answer, ErrorAnswer):
        message = answer.message
        if answer.runbook and answer.runbook not in message:
            message = f"{message}. See {answer.runbook}"
        _fail(f"brokerd: {message}")
    if not isinstance(answer, kind):
        _fail(f"brokerd answered {type(answer).__name__} to this request")
    return answer


def _server_arg(value: str) -> str:
    text_arg(value, "SERVER")
    if re.fullmatch(r"[a-z][a-z0-9-]{0,30}", value, re.ASCII) is None:
        raise click.UsageError("SERVER is a server id of [a-z][a-z0-9-]{0,30}")
    return value


def _status(app: App) -> McpStatusAnswer:
    answer: McpStatusAnswer = _expect(_ask(app, McpStatusRequest()), McpStatusAnswer)
    return answer


def _one(app: App, server: str) -> McpServerView:
    """`mcp_status` of one server: its view with each offered tool as the model sees it."""
    answer: McpStatusAnswer = _expect(_ask(app, McpStatusRequest(server=server)),
                                      McpStatusAnswer)
    for view in answer.servers:
        if view.id == server:
            return view
    _fail(f"brokerd: no valid source declares the server {server} (bxctl mcp list)")


def _state_words(view: McpServerView) -> str:
    if view.state == "unpinned":
        return f"unpinned ({view.reason or 'none'})"
    return view.state.replace("_", " ")


# -- rendering ----------------------------------------------------------------------------


def _field(head: str, value: str, width: int) -> list[str]:
    """A row of boxmaker's `head` and an escaped value behind the gutter."""
    return wrap_row(head, value, width, _VALUE)


def _lines(rows: Sequence[Row], width: int) -> list[str]:
    lines: list[str] = []
    for head, value in rows:
        lines += [head] if value is None else _field(head, value, width)
    return lines


def tool_lines(tool: ProbedTool, width: int) -> list[str]:
    """One probed tool, whole: every field the server sent escaped behind the gutter."""
    return _lines(tool_rows(tool), width)


def probe_lines(probe: McpProbeAnswer, width: int) -> list[str]:
    return _lines(probe_rows(probe), width)


def unchanged(probe: McpProbeAnswer) -> bool:
    """Nothing changed from the current pin and nothing is invalidated (`--yes` may skip)."""
    return probe.pinned == probe.digest and not probe.invalidates and all(
        tool.status == "same" for tool in probe.tools)


def list_lines(servers: Sequence[McpServerView]) -> list[str]:
    if not servers:
        return ["no MCP servers are declared"]
    lines = []
    for view in servers:
        pin = view.pin[:12] if view.pin is not None else "-"
        lines.append(f"{view.id}  {_state_words(view)} · pin {pin} · {view.offered} offered"
                     f" · {len(view.disabled)} disabled · {view.failures} failures")
    return lines


def show_lines(view: McpServerView, width: int) -> list[str]:
    lines = [f"server   {view.id}",
             f"state    {_state_words(view)}",
             f"pin      {view.pin or '-'}",
             f"offered  {view.offered} tools",
             f"failures {view.failures} (3 within 10 minutes cool the server down for 5)"]
    for tool in view.disabled:
        lines += _field(f"disabled ({escape_line(tool.rule)}) ",
                        f"{escape_line(tool.tool)}: {escape_line(tool.message)}", width)
    if view.tools is None:
        return lines
    if view.offered and not view.tools:
        lines.append("the model sees none of its tools: they would not fit one frame of "
                     "its tool list")
    for offered in view.tools:
        lines.append("")
        lines += offered_lines(offered, width)
    return lines


def offered_lines(tool: OfferedToolView, width: int) -> list[str]:
    """One offered tool as the model sees it, whole: its model name, the pinned (or the
    owner's) description and parameters escaped behind the gutter, and the kinds and
    egress brokerd derives."""
    lines = [f"tool {escape_line(tool.model_name)}  (on the wire {escape_line(tool.name)})"]
    lines += _field(f"{HEAD}description: ", escape_line(tool.description), width)
    if tool.opaque is not None:
        lines += _field(f"{HEAD}opaque (ask or deny only): ", escape_line(tool.opaque), width)
    if tool.kinds:
        for name, kind in tool.kinds.items():
            lines += _field(f"{HEAD}kind {escape_line(kind)} for ", escape_line(name), width)
    else:
        lines.append(f"{HEAD}kinds: none (no argument is a path, url or host)")
    lines.append(f"{HEAD}egress: {escape_line(tool.egress)}")
    lines += _field(f"{HEAD}parameters: ", escape_line(dumps(tool.parameters)), width)
    return lines


# -- commands -----------------------------------------------------------------------------


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the mcp_status answer.")
@pass_app
def mcp_list(app: App, as_json: bool) -> None:
    """Every declared server: state, pin, offered and disabled tools."""
    status = _status(app)
    if as_json:
        click.echo(dumps_terminal(unstructure(status)))
        return
    for line in list_lines(status.servers):
        click.echo(line)


@mcp.command("show")
@click.argument("server", metavar="SERVER")
@click.option("--json", "as_json", is_flag=True, help="Print the server's mcp_status entry.")
@pass_app
def mcp_show(app: App, server: str, as_json: bool) -> None:
    """One server: its pin, each offered tool as the model sees it (with its kinds and
    egress), and the disabled ones and why."""
    view = _one(app, _server_arg(server))
    if as_json:
        click.echo(dumps_terminal(unstructure(view)))
        return
    for line in show_lines(view, terminal_width()):
        click.echo(line)


PROBE_SECONDS = 330.0
"""A probe starts the server (podman create, init, start, negotiate, list): brokerd's
start timeout, twice for an era probe, and some."""


@mcp.command("pin")
@click.argument("server", metavar="SERVER")
@click.option("--yes", is_flag=True,
              help="Pin without asking when nothing changed and nothing is invalidated.")
@click.option("--no-qr", is_flag=True,
              help="Under require_passkey: print the signing link without its QR code.")
@pass_app
def mcp_pin(app: App, server: str, yes: bool, no_qr: bool) -> None:
    """Probe SERVER, show everything and the diff, confirm, and pin.

    Under [approvals] require_passkey the pin is signed on the approval page: on
    yes, bxctl prints a one-time link (and QR code) to a page that shows the same
    probe and signs the pin with your passkey; brokerd pins when it verifies.
    """
    server = _server_arg(server)
    probe: McpProbeAnswer = _expect(_ask(app, McpProbeRequest(server=server),
                                         timeout=PROBE_SECONDS), McpProbeAnswer)
    for line in probe_lines(probe, terminal_width()):
        click.echo(line)
    if not any(tool.status != "removed" for tool in probe.tools):
        _fail(f"the server {server} serves no tools: nothing to pin")
    if not (yes and unchanged(probe)):
        if not click.confirm(f"pin {server} as {probe.digest[:12]}?", default=False):
            _fail("not pinned")
        if probe.invalidates and not click.confirm(
                f"{len(probe.invalidates)} grants would stop applying. Pin anyway?",
                default=False):
            _fail("not pinned")
    invalidates = [Invalidated(grant=i.grant, rule=i.rule) for i in probe.invalidates]
    passkeys: PasskeyList = _expect(_ask(app, PasskeysRequest()), PasskeyList)
    if passkeys.require_passkey:
        link: Enrolment = _expect(_ask(app, McpPinLinkRequest(
            server=server, probe_id=probe.probe_id, digest=probe.digest,
            invalidates=invalidates)), Enrolment)
        show_link(link, f"sign the pin of {server} as {probe.digest[:12]}", not no_qr)
        click.echo("")
        click.echo(f"{server} is pinned when your passkey signs it there "
                   "(bxctl mcp list shows it)")
        return
    answer = _ask(app, McpPinRequest(server=server, probe_id=probe.probe_id,
                                     digest=probe.digest, invalidates=invalidates))
    _expect(answer, Ok)
    click.echo(f"pinned {server} {probe.digest}")


@mcp.command("unpin")
@click.argument("server", metavar="SERVER")
@click.option("--reason", default=None, help="Why (recorded in the audit log).")
@pass_app
def mcp_unpin(app: App, server: str, reason: str | None) -> None:
    """Unpin SERVER: it offers nothing until pinned again."""
    server = _server_arg(server)
    if reason is not None:
        text_arg(reason, "--reason")
    _expect(_ask(app, McpUnpinRequest(server=server, reason=reason)), Ok)
    click.echo(f"unpinned {server}")


@mcp.command("restart")
@click.argument("server", metavar="SERVER")
@pass_app
def mcp_restart(app: App, server: str) -> None:
    """End SERVER's cool-down (after 3 failed starts within 10 minutes)."""
    server = _server_arg(server)
    _expect(_ask(app, McpRestartRequest(server=server)), Ok)
    click.echo(f"{server}: no cool-down")

