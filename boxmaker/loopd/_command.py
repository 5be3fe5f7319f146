"""What every `loopd` subcommand shares: ``--config`` and the fail-closed exit.

The subcommand modules import this, never `_cli` (which imports them to
assemble the group): no import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .._error_table import shown
from .._errors import ConfigError, UnavailableError
from ..proto._escape import escape_text
from ._config import LoopdConfig, load_config

F = TypeVar("F", bound=Callable[..., Any])


class Failed(UnavailableError, click.ClickException):
    """A fail-closed exit: the message (already escaped) on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(self.format_message(), err=True)


def config_option(func: F) -> F:
    """``--config PATH`` (default: $BOXMAKER_HOME/loopd.toml)."""
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path), default=None,
        help="loopd.toml (default: $BOXMAKER_HOME/loopd.toml).",
    )(func)


def load_or_fail(path: Path | None) -> LoopdConfig:
    """The resolved config, or a `Failed` pointing at #loopd-start-failed."""
    try:
        return load_config(path)
    except ConfigError as exc:
        raise Failed(
            shown(f"loopd: bad configuration: {escape_text(str(exc), keep_newlines=False)}",
                  exc, joiner=" ")
        ) from exc
