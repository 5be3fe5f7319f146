"""One pass over the audit directory for `bxctl audit verify --witness-key`: the
chain verifier and the Merkle tree (10-checkpoints) fed the same lines.

Gives the `ChainReport`, the number of complete lines (the tree size), the
root at each size asked for, and where each file's first line sits among the
leaves (to place `break` and `recovery` records).  Reads; writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from ._audit_files import Progress, iter_lines, list_log_files
from .proto.audit import ChainReport, ChainVerifier, OnRecord
from .proto.tlog import EMPTY_ROOT, CompactRange, leaf_hash


@attrs.frozen(kw_only=True)
class TreeFacts:
    size: int
    roots: dict[int, bytes]
    file_start: dict[str, int]
    """The 0-based leaf index of each day file's first line."""

    def position(self, file: str, line: int) -> int | None:
        """The 1-based position among the leaves of (file, 1-based line)."""
        start = self.file_start.get(file)
        return None if start is None else start + line


def verify_with_tree(
    directory: Path,
    *,
    sizes: set[int],
    expect_head: tuple[int, str] | None = None,
    progress: Progress | None = None,
    on_record: OnRecord | None = None,
) -> tuple[ChainReport, TreeFacts]:
    """Raises OSError when the log cannot be read.  `on_record` sees each verified
    record, as `verify_directory`'s does (the kept assertions' check)."""
    verifier = ChainVerifier(expect_head=expect_head, on_record=on_record)
    tree = CompactRange()
    roots: dict[int, bytes] = {0: EMPTY_ROOT} if 0 in sizes else {}
    file_start: dict[str, int] = {}
    for log_file in list_log_files(directory):
        if not log_file.day_file:
            verifier.ignore_file(log_file.name)
            continue
        if not verifier.begin_file(log_file.name):  # pragma: no cover - names agree
            continue
        file_start[log_file.name] = tree.size
        feed = verifier.feed_content
        for content, newline in iter_lines(log_file.path, progress):
            feed(content, newline)
            if newline:
                tree.append(leaf_hash(content))
                if tree.size in sizes:
                    roots[tree.size] = tree.root()
        verifier.end_file()
    return verifier.finish(), TreeFacts(size=tree.size, roots=roots, file_start=file_start)
