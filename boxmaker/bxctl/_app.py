"""What every bxctl subcommand shares: the `App` on ``ctx.obj`` and the argument checks.

The subcommand modules import this, never `_cli` (which imports them to
assemble the group): no import circle.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import click

from .._errors import ConfigError
from ._config import BxctlConfig, load_config


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
