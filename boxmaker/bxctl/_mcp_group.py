"""The `bxctl mcp` group (12-tool-sources "bxctl"): MCP servers as tool sources.

The command modules add their commands to this group when `_mcp_all` imports
them: the ones that ask brokerd (list, show, pin, unpin, restart) and the
offline ones (check, draft).
"""

from __future__ import annotations

import click


@click.group()
def mcp() -> None:
    """MCP servers as tool sources: their pins, tools and grants."""


__all__ = ["mcp"]
