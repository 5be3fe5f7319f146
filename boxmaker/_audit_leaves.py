"""The audit log's lines as Merkle leaves (10-checkpoints "The tree").

Leaf ``i`` is the ``i``-th complete line (one that ends with ``\\n``; its bytes
without it) across the day files in name order, whatever it holds: records,
lines that do not parse, torn lines a recovery closed.  Shared by brokerd
(building its tree) and bxctl (checking a checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ._audit_files import iter_lines, list_log_files


def iter_leaves(directory: Path) -> Iterator[tuple[str, int, bytes]]:
    """(file name, 1-based line, line bytes) of every complete line, in order."""
    for log_file in list_log_files(directory):
        if not log_file.day_file:
            continue
        for number, (content, newline) in enumerate(iter_lines(log_file.path), start=1):
            if newline:
                yield log_file.name, number, content
