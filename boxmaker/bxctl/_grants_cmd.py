"""`bxctl grants check|explain` (filled by the policy issue)."""

from __future__ import annotations

import click


@click.group()
def grants() -> None:
    """Check grant files and explain decisions, with no daemon needed."""
