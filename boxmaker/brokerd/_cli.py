"""The `brokerd` command line."""

from __future__ import annotations

import click


@click.group()
def cli() -> None:
    """brokerd (not built yet)."""


def main() -> None:
    cli()
