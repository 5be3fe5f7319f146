"""The root click group: it only assembles the subcommands of their own modules.

What the subcommands share (`App`, `pass_app`, `text_arg`) is in `_app`.
"""

from __future__ import annotations

from pathlib import Path

import click

from .. import __version__

# _replay_cmd and _suggest_cmd add `grants replay` and `grants suggest` when imported
from . import (  # noqa: F401
    _admin_cmd,
    _audit_cmd,
    _chat_cmd,
    _grants_cmd,
    _passkey_cmd,
    _replay_cmd,
    _suggest_cmd,
)
from ._app import App


@click.group()
@click.version_option(__version__, prog_name="bxctl")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="bxctl.toml (default: $BOXMAKER_HOME/bxctl.toml).")
@click.option("--admin-socket", type=click.Path(path_type=Path), default=None,
              help="brokerd's admin.sock.")
@click.option("--loop-socket", type=click.Path(path_type=Path), default=None,
              help="loopd's loop.sock.")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, admin_socket: Path | None,
        loop_socket: Path | None) -> None:
    """The owner's command line for boxmaker: chat, approvals, grants, audit."""
    ctx.obj = App(config_path, admin_socket, loop_socket)


cli.add_command(_audit_cmd.audit)
cli.add_command(_grants_cmd.grants)
cli.add_command(_chat_cmd.chat)
for _command in _admin_cmd.COMMANDS:
    cli.add_command(_command)
cli.add_command(_passkey_cmd.passkey)


def main() -> None:
    cli()
