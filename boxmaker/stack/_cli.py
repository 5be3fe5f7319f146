"""`boxmaker up`: the one-command development stack."""

from __future__ import annotations

import click


@click.group()
def cli() -> None:
    """boxmaker: the development stack."""


@cli.command()
def up() -> None:
    """Start brokerd, inferproxy and loopd and open a chat."""
    raise click.ClickException(
        "boxmaker up is not built yet: the daemons it starts (brokerd, loopd, "
        "inferproxy) are still being written. Use bxctl for the audit log and grants."
    )


def main() -> None:
    cli()
