"""The `inferproxy` command line: ``inferproxy serve [--config PATH]``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from .. import __version__, _trio_run
from .._error_table import shown
from .._errors import ConfigError, StartFailed, UnavailableError
from .._sockets._unix import ListenerLost
from ..proto._escape import escape_text
from ._config import load_config
from ._serve import run


class Failed(UnavailableError, click.ClickException):
    """A fail-closed exit: the message (already escaped) on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(self.format_message(), err=True)


def _escaped(exc: BaseException) -> str:
    return escape_text(str(exc), keep_newlines=False)


@click.group()
@click.version_option(__version__, prog_name="inferproxy")
def cli() -> None:
    """inferproxy: the only way from loopd to the inference server."""


@cli.command("serve")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="inferproxy.toml (default: $BOXMAKER_HOME/inferproxy.toml).")
def serve_cmd(config_path: Path | None) -> None:
    """Forward loopd's requests to the inference server until SIGTERM or SIGINT."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s inferproxy %(levelname)s %(message)s")
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise Failed(shown(f"inferproxy: bad configuration: {_escaped(exc)}", exc,
                           joiner=" ")) from exc
    try:
        _trio_run.run(lambda: run(config))
    except StartFailed as exc:
        raise Failed(shown(f"inferproxy: cannot start: {_escaped(exc)}", exc,
                           joiner=" ")) from exc
    except ListenerLost as exc:
        raise Failed(shown(f"inferproxy: stopped: {_escaped(exc)}", exc, joiner=" ",
                           shown_by="inferproxy")) from exc


def main() -> None:
    cli()
