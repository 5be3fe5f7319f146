"""`bxctl mcp check|draft` (12-tool-sources "bxctl"): offline, no daemon needed.

Both read what brokerd reads, as `bxctl grants check` does: brokerd's config
(`--brokerd-config`, or ``$BOXMAKER_HOME/brokerd.toml`` when it exists) names
the sources directory and the audit directory; a server's pin is the one
brokerd would use: the log's newest pin record after the last accepted
break, whose `audit/pins/` file holds (`boxmaker._source_files`).

- `check [DIR]`: the sources report (S1..S17 rules of the declarations), exit
  0 valid, 1 problems;
- `draft SERVER`: commented grant stubs for every offered tool of the pinned
  server (`proto.mcp.grant_stubs`), exit 1 when the server is not declared or
  has no pin.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import click

from .._brokerd_config import BrokerdConfig, load_config
from .._error_table import DENIAL_RUNBOOKS
from .._errors import ConfigError
from .._source_files import offline_pin, offline_view, read_sources
from ..policy._explain import check_report_lines
from ..policy._mcp_verdict import McpRegistry
from ..proto._convert import unstructure
from ..proto._escape import escape_line
from ..proto._json import dumps_terminal
from ..proto.mcp import PinCheck, grant_stubs, tool_verdicts
from ._app import text_arg
from ._mcp_group import mcp
from ._screen import terminal_width, wrap_line

_CONFIG_HELP = "brokerd.toml, for its sources and audit directories " \
               "(default: $BOXMAKER_HOME/brokerd.toml)."


def _exit(code: int) -> NoReturn:
    click.get_current_context().exit(code)


def _config(path: Path | None) -> BrokerdConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        raise click.UsageError(f"brokerd config: {exc}") from None


def offline_pins(config: BrokerdConfig, *, sources: Path | None = None,
                 pins: Path | None = None) -> tuple[dict[str, PinCheck], McpRegistry]:
    """Each declared server's pin as brokerd chooses it from its log and pin files
    (`_source_files.offline_view`); exit 1 when the log cannot be read."""
    try:
        _, checks, registry = offline_view(
            sources if sources is not None else config.sources, config.audit,
            runner_output_max=config.runner.output_max_bytes, pins_dir=pins)
    except OSError as exc:
        click.echo(wrap_line(escape_line(
            f"bxctl: the audit log cannot be read ({exc.strerror or exc}): which pin holds "
            "is the log's newest pin record"), terminal_width()), err=True)
        _exit(1)
    return checks, registry


@mcp.command("check")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the sources report as JSON.")
@click.option("--brokerd-config", type=click.Path(path_type=Path), default=None,
              help=_CONFIG_HELP)
def check(directory: Path | None, as_json: bool, brokerd_config: Path | None) -> None:
    """Check every source file in DIR (default: brokerd's sources directory).

    Exit 0 when the set is valid (a missing directory: no servers), 1 when it has
    problems.
    """
    config = _config(brokerd_config)
    where = directory if directory is not None else config.sources
    report = read_sources(where, runner_output_max=config.runner.output_max_bytes).report
    if as_json:
        click.echo(dumps_terminal(unstructure(report)))
    else:
        width = terminal_width()
        for line in check_report_lines(report, os.fsdecode(where), noun="server",
                                       runbook=DENIAL_RUNBOOKS["sources_invalid"],
                                       counted="MCP server", denied="every mcp.* call"):
            click.echo(wrap_line(line, width))
    _exit(0 if report.ok else 1)


@mcp.command("draft")
@click.argument("server")
@click.option("--brokerd-config", type=click.Path(path_type=Path), default=None,
              help=_CONFIG_HELP)
def draft(server: str, brokerd_config: Path | None) -> None:
    """Print commented grant stubs for every offered tool of the pinned SERVER.

    Uncomment a stub, fill in each FILL IN and put it in a grants file; `bxctl
    grants check` then shows whether it matches anything.  Exit 1 when SERVER is
    not declared or not pinned.
    """
    server = text_arg(server, "SERVER")
    config = _config(brokerd_config)
    checks, registry = offline_pins(config)
    width = terminal_width()
    if not registry.valid:
        click.echo(wrap_line(f"bxctl: the tool-source set has problems (bxctl mcp check "
                             f"lists them). See {DENIAL_RUNBOOKS['sources_invalid']}", width),
                   err=True)
        _exit(1)
    one = registry.servers.get(server)
    if one is None:
        click.echo(wrap_line(escape_line(f"bxctl: no source declares the MCP server "
                                         f"{server}"), width), err=True)
        _exit(1)
    pin = offline_pin(checks, server)
    if pin is None:
        click.echo(wrap_line(escape_line(
            f"bxctl: the MCP server {server} is unpinned "
            f"({one.unpinned or 'none'}); bxctl mcp pin {server} reviews and pins it. "
            f"See {DENIAL_RUNBOOKS['source_unpinned']}"), width), err=True)
        _exit(1)
    click.echo(grant_stubs(server, pin.digest, tool_verdicts(one.decl, pin)), nl=False)
