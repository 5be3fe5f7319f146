"""Giving the C heap's free pages back to the system after a large load (issue 23).

glibc raises its mmap threshold each time it frees a large mapped block, so the
tables of a 100,000-grant load (dicts growing, their old tables freed) end up on
the heap, and what is freed there stays resident: about 20 MB of a 100,000-grant
start.  `malloc_trim(0)` hands every free page of the heap back (it moves
nothing: what is alive stays where it is).  Where the C library has no
`malloc_trim` (not glibc), `trim` does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Final

_MALLOC_TRIM: Final[Callable[[int], int] | None] = getattr(
    ctypes.CDLL(None), "malloc_trim", None)


def trim() -> bool:
    """Return the heap's free pages to the system; True when some were."""
    if _MALLOC_TRIM is None:
        return False
    return bool(_MALLOC_TRIM(0))
