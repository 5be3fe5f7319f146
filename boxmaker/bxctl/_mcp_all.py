"""`bxctl mcp` whole: the group of `_mcp_group` with every command module's commands added.

The lazy root group (`_cli`) imports this module when `mcp` runs; each module
imported here adds its commands to the group.
"""

from __future__ import annotations

from . import (
    _mcp_cmd,  # noqa: F401  (it adds list, show, pin, unpin, restart)
    _mcp_offline_cmd,  # noqa: F401  (it adds check, draft)
)
from ._mcp_group import mcp

__all__ = ["mcp"]
