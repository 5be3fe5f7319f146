"""The `loopd` command line: one click group; subcommands take ``--config``.

`self-test` is here; `serve` is registered from its own module in `_register`
when it exists.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import trio

from .. import __version__
from .._error_table import bare, shown
from .._errors import UnavailableError
from .._http import InferenceError, LlamaClient
from ..proto._escape import escape_text
from ._config import ConfigError, LoopdConfig, load_config
from ._selftest import Expected, InferenceMismatch, self_test

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


@click.group()
@click.version_option(__version__, prog_name="loopd")
def cli() -> None:
    """loopd: the agent loop (model -> brokerd -> tools -> model)."""


@cli.command("self-test")
@config_option
def self_test_cmd(config_path: Path | None) -> None:
    """Check the inference server against loopd.toml; print what was found; exit 0/1."""
    config = load_or_fail(config_path)
    inference = config.inference
    client = LlamaClient(inference.endpoint, timeouts=inference.timeouts)
    expected = Expected(slots=inference.slots, n_ctx_per_slot=inference.n_ctx_per_slot,
                        tools_offered=bool(config.tools))
    click.echo(f"inference server: {inference.endpoint}")
    click.echo(f"expecting: {inference.slots} slots, n_ctx {inference.n_ctx_per_slot} per slot,"
               f" tool calls {'required' if expected.tools_offered else 'not required'}")
    try:
        report = trio.run(
            lambda: self_test(client, expected, load_timeout_s=inference.load_timeout_s)
        )
    except (InferenceError, InferenceMismatch) as exc:
        raise Failed(f"self-test failed: {shown(bare(exc.message, exc), exc, joiner=' ')}") from exc
    for line in report.lines()[1:]:
        click.echo(line)
    click.echo("self-test passed")


def _register() -> None:
    """Subcommands that live in their own modules."""
    from ._serve_cmd import serve_cmd

    cli.add_command(serve_cmd)


_register()


def main() -> None:
    cli()
