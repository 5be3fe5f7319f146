"""The index of the protected files' inodes (issue 22 item 6): hard links decided by inode.

A hard link has no parent to walk: the owner's uid (``cp -al``, ``rsync
--link-dest``, a dedup tool) can give one of brokerd's files (checkpoint key,
brokerd.toml, an audit day file, a grant file) a second name inside a grant.
`ProtectedInodes` holds the ``(st_dev, st_ino)`` of every file under the
protected roots marked `Root.index` (brokerd's own directories and the
owner's protected paths); the runner asks it about every existing target with
more than one link, by the identity its host walk opened.

The index is made at start and made again whenever a target with more than
one link is not in it, so a file brokerd made since (a new audit day file, a
checkpoint, a state file written by rename) is found.  A file with one link
has no other name, and its one name was walked.  More than `MAX_INDEXED`
files make the index incomplete: then no file with more than one link is
used (fail closed).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from ..._protected import Root

MAX_INDEXED = 200_000
_MAX_DEPTH = 64


class ProtectedInodes:
    """``(st_dev, st_ino)`` of the files under the indexed protected roots -> a path."""

    def __init__(self, roots: Iterable[Root]) -> None:
        self._roots = [r for r in roots if r.index]
        self._known: dict[tuple[int, int], str] = {}
        self.complete = True
        self.refresh()

    def refresh(self) -> None:
        """Index every non-directory below the roots again (I/O: lstat and scandir)."""
        known: dict[tuple[int, int], str] = {}
        complete = True
        for root in self._roots:
            try:
                st = os.lstat(root.real)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                known[(st.st_dev, st.st_ino)] = root.real
                continue
            complete = _scan(root.real, known, 0) and complete
            if len(known) > MAX_INDEXED:
                complete = False
                break
        self._known = known
        self.complete = complete

    def lookup(self, dev: int, ino: int) -> str | None:
        """The protected file with that identity (made again when not found), or None."""
        found = self._known.get((dev, ino))
        if found is None:
            self.refresh()
            found = self._known.get((dev, ino))
        return found


def _scan(directory: str, known: dict[tuple[int, int], str], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return True  # gone or unreadable: nothing of it can be linked by us either
    complete = True
    for entry in entries:
        if len(known) > MAX_INDEXED:
            return False
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            complete = _scan(entry.path, known, depth + 1) and complete
        else:
            known[(st.st_dev, st.st_ino)] = entry.path
    return complete
