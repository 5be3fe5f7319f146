"""The root click group.  Subcommands live in their own modules."""

from __future__ import annotations

from pathlib import Path

import attrs
import click

from .. import __version__
from ._config import BxctlConfig, ConfigError, load_config


@attrs.define
class App:
    """What every subcommand receives through ``ctx.obj``."""

    config_path: Path | None
    admin_socket: Path | None
    loop_socket: Path | None
    _config: BxctlConfig | None = None

    @property
    def config(self) -> BxctlConfig:
        if self._config is None:
            try:
                self._config = load_config(self.config_path)
            except ConfigError as exc:
                raise click.UsageError(str(exc)) from exc
            if self.admin_socket is not None:
                self._config = attrs.evolve(self._config, admin_socket=self.admin_socket)
            if self.loop_socket is not None:
                self._config = attrs.evolve(self._config, loop_socket=self.loop_socket)
        return self._config


pass_app = click.make_pass_decorator(App)


def text_arg(value: str, what: str) -> str:
    """Text arguments are text (07-bxctl): one that is not valid UTF-8 is a usage error."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise click.UsageError(f"{what} is not valid UTF-8") from None
    return value


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


def _register() -> None:
    from . import _audit_cmd, _chat_cmd, _grants_cmd

    cli.add_command(_audit_cmd.audit)
    cli.add_command(_grants_cmd.grants)
    cli.add_command(_chat_cmd.chat)

    # _replay_cmd and _suggest_cmd add to `grants` when imported
    from . import _admin_cmd, _passkey_cmd, _replay_cmd, _suggest_cmd  # noqa: F401

    for command in _admin_cmd.COMMANDS:
        cli.add_command(command)
    cli.add_command(_passkey_cmd.passkey)


_register()


def main() -> None:
    cli()
