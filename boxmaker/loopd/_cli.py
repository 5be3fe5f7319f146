"""The `loopd` command line: one click group that only assembles its subcommands.

`serve` is in `_serve_cmd`, `self-test` in `_selftest_cmd`; what they share
(``--config``, the fail-closed exit) in `_command`.
"""

from __future__ import annotations

import click

from .. import __version__
from ._selftest_cmd import self_test_cmd
from ._serve_cmd import serve_cmd


@click.group()
@click.version_option(__version__, prog_name="loopd")
def cli() -> None:
    """loopd: the agent loop (model -> brokerd -> tools -> model)."""


cli.add_command(self_test_cmd)
cli.add_command(serve_cmd)


def main() -> None:
    cli()
