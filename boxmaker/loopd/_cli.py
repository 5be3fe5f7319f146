"""The `loopd` command line."""

from __future__ import annotations

import click


@click.group()
def cli() -> None:
    """loopd (not built yet)."""


def main() -> None:
    cli()
