"""`bxctl audit verify|head|show` (filled by the foundation issue)."""

from __future__ import annotations

import click


@click.group()
def audit() -> None:
    """Verify and read the audit log, with no daemon needed."""
