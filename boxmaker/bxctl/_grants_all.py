"""`bxctl grants` whole: the group of `_grants_cmd` with `replay` and `suggest` added.

The lazy root group (`_cli`) imports this module when `grants` runs; the two
modules add their commands to the group when imported.
"""

from __future__ import annotations

from . import _replay_cmd, _suggest_cmd  # noqa: F401  (they add replay and suggest)
from ._grants_cmd import grants

__all__ = ["grants"]
