"""`bxctl grants check|explain` (07-bxctl): offline, no daemon needed.

`explain` decides exactly as brokerd would: the same `decide`, and the same
protected paths, taken from brokerd's config (`--brokerd-config`, or
``$BOXMAKER_HOME/brokerd.toml`` when it exists) or its defaults.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import click

from .._brokerd_config import commands_path, compute_protected, load_config
from .._error_table import see, shown
from .._errors import ConfigError
from ..policy._decide import decide
from ..policy._decision import Ask, Decision, ProtectedPaths, ToolCall
from ..policy._explain import (
    EXPLAIN_HEAD,
    command_explanations,
    explain_document,
    explain_rows,
    report_lines,
)
from ..policy._load import GrantsMissing, load_grants
from ..policy._mcp_dormant import dormant_grants, dormant_json, dormant_lines
from ..policy._mcp_verdict import NO_SOURCES
from ..policy._model import GrantSet, InvalidGrantSet
from ..proto._convert import unstructure
from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto._json import dumps_terminal, loads_object
from ..proto._taint import LABELS, Label, Taint
from ._app import App, pass_app, text_arg
from ._mcp_offline_cmd import offline_pins
from ._screen import GUTTER, terminal_width, wrap_line, wrap_row


@click.group()
def grants() -> None:
    """Check grant files and explain decisions, with no daemon needed."""


def _exit(code: int) -> NoReturn:
    click.get_current_context().exit(code)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(wrap_line(escape_line(message), terminal_width()), err=True)
    _exit(code)


def _print_json(value: Any) -> None:
    click.echo(dumps_terminal(value))


def _load(directory: Path, commands_path: tuple[str, ...] = ()) -> GrantSet | InvalidGrantSet:
    try:
        return load_grants(directory, commands_path=commands_path)
    except GrantsMissing as exc:
        _fail(f"bxctl: {shown(str(exc), exc)}", 1)
    except OSError as exc:
        _fail(
            f"bxctl: the grants directory {os.fsdecode(directory)!r} cannot be read "
            f"({exc.strerror}). {see(GrantsMissing)}",
            1,
        )


@grants.command("check")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the grants report as JSON.")
@click.option("--brokerd-config", type=click.Path(path_type=Path), default=None,
              help="brokerd.toml, for G21 against its [commands] path "
                   "(default: $BOXMAKER_HOME/brokerd.toml).")
@pass_app
def check(app: App, directory: Path | None, as_json: bool, brokerd_config: Path | None) -> None:
    """Check every grant file in DIR (default: the configured grants directory).

    Exit 0 when the set is valid, 1 when it has problems or DIR is missing.
    """
    where = directory if directory is not None else app.config.grants
    try:  # brokerd's [commands] path, so that G21 is checked as brokerd checks it
        config = load_config(brokerd_config)
    except ConfigError as exc:
        raise click.UsageError(f"brokerd config: {exc}") from None
    state = _load(where, commands_path(config))
    report = state.report
    # the dormant grants against the configured sources and the pin files (12)
    _, registry = offline_pins(config)
    dormant = dormant_grants(state, registry) if isinstance(state, GrantSet) else []
    if as_json:
        _print_json({**unstructure(report), "dormant": dormant_json(dormant)})
    else:
        lines = report_lines(report, os.fsdecode(where))
        if dormant:
            noun = "grant matches" if len(dormant) == 1 else "grants match"
            lines[-1:] = [*dormant_lines(dormant),
                          f"{lines[-1]}; {len(dormant)} dormant {noun} nothing"]
        _echo_report(lines)
    _exit(0 if report.ok else 1)


def _echo_report(lines: list[str]) -> None:
    """`report_lines` (escaped, file names first) wrapped behind the gutter."""
    width = terminal_width()
    for line in lines:
        click.echo(wrap_line(line, width))


def _echo_explain(result: Decision | Ask, state: GrantSet | None) -> None:
    """Each value wrapped behind the gutter under the value column (as approvals)."""
    width = terminal_width()
    indent = " " * EXPLAIN_HEAD + GUTTER
    for head, value in explain_rows(result, state):
        click.echo("\n".join(wrap_row(head, value, width, indent)))


def _mcp_rows(tool: str, result: Decision | Ask) -> dict[str, Any]:
    """An `mcp.*` call's effective arguments (the schema's defaults filled, what the
    constraints were matched against) and its server's pin digest."""
    if not tool.startswith("mcp."):
        return {}
    return {"effective_args": result.effective_args, "pin": result.pin}


def brokerd_protected_paths(config_path: Path | None) -> tuple[str, ...]:
    """brokerd's protected paths, as its `decide` gets them: brokerd's own loader
    and brokerd's own `compute_protected` (boxmaker._brokerd_config), nothing
    re-derived.  Raises ConfigError."""
    return compute_protected(load_config(config_path)).spellings


@grants.command("explain")
@click.option("--tool", "tool", required=True, help="The tool name, as the model would send it.")
@click.option("--args", "args_text", required=True, help="The arguments: one JSON object.")
@click.option(
    "--label",
    type=click.Choice(LABELS),
    default="public",
    show_default=True,
    help="The session's label.",
)
@click.option("--untrusted", is_flag=True, help="The session is untrusted.")
@click.option(
    "--grants",
    "grants_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The grants directory (default: the configured one).",
)
@click.option(
    "--brokerd-config",
    type=click.Path(path_type=Path),
    default=None,
    help="brokerd.toml, for the protected paths and [commands] path "
    "(default: $BOXMAKER_HOME/brokerd.toml).",
)
@click.option("--sources", "sources_dir", type=click.Path(path_type=Path), default=None,
              help="The MCP sources directory, for mcp.* tools (default: brokerd's).")
@click.option("--pins", "pins_dir", type=click.Path(path_type=Path), default=None,
              help="The pin files' directory, for mcp.* tools (default: brokerd's "
                   "audit/pins).")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@pass_app
def explain(
    app: App,
    tool: str,
    args_text: str,
    label: Label,
    untrusted: bool,
    grants_dir: Path | None,
    brokerd_config: Path | None,
    sources_dir: Path | None,
    pins_dir: Path | None,
    as_json: bool,
) -> None:
    """Decide one call offline and show which grants matched, applied and won.

    An `mcp.*` tool is decided against the sources (`--sources`) and the pin files
    whose digest recomputes (`--pins`), as brokerd's tool registry would be.

    Exit 0 when the call would be allowed or asked, 1 when denied, 2 on usage errors.
    """
    tool = text_arg(tool, "--tool")
    try:
        args = loads_object(text_arg(args_text, "--args").encode("utf-8"))
    except DecodeError as exc:
        raise click.UsageError(f"--args is not one JSON object: {exc}") from None
    try:
        config = load_config(brokerd_config)
        protected = ProtectedPaths.of(compute_protected(config).spellings)
    except ConfigError as exc:
        raise click.UsageError(f"brokerd config: {exc}") from None
    where = grants_dir if grants_dir is not None else app.config.grants
    state = _load(where, commands_path(config))
    taint = Taint(label=label, untrusted=untrusted)
    registry = NO_SOURCES
    if tool.startswith("mcp."):  # the tool registry of brokerd's sources and pin files
        _, registry = offline_pins(config, sources=sources_dir, pins=pins_dir)
    result = decide(ToolCall(tool=tool, args=args), taint, state, protected, registry)
    if isinstance(state, InvalidGrantSet):
        if as_json:
            _print_json(unstructure(state.report))
        else:
            _echo_report(report_lines(state.report, os.fsdecode(where)))
            _echo_explain(result, None)
        _exit(1)
    commands = command_explanations(result, state)
    mcp_rows = _mcp_rows(tool, result)
    if as_json:
        document = explain_document(result)
        if commands:
            document["commands"] = [c.as_json() for c in commands]
        if tool.startswith("mcp."):
            document.update(mcp_rows)
        _print_json(document)
    else:
        _echo_explain(result, state)
        if commands:
            _echo_report([line for c in commands for line in c.lines()])
        width = terminal_width()
        indent = " " * EXPLAIN_HEAD + GUTTER
        for head, value in mcp_rows.items():
            if value is not None:
                text = value if isinstance(value, str) else dumps_terminal(value)
                name = "effective" if head == "effective_args" else head
                click.echo("\n".join(wrap_row(f"{name:<{EXPLAIN_HEAD - 1}} ",
                                               escape_line(text), width, indent)))
    denied = explain_document(result)["outcome"] == "denied"
    _exit(1 if denied else 0)
