"""The `inferproxy` command line."""

from __future__ import annotations

import click


@click.group()
def cli() -> None:
    """inferproxy (not built yet)."""


def main() -> None:
    cli()
