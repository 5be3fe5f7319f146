"""brokerd's Merkle tree over the audit lines and its stored hashes (10-checkpoints).

In memory: a `CompactRange` (the root in ``O(log n)``).  On disk, under
``audit/tiles/``: one file per level, ``level-NN``, holding the 32-byte hashes
of the complete subtrees of that level in order, so that any node a proof
needs is one ``pread``.  The lines are the truth: at start the tree is
recomputed from them and the stored hashes are checked (every level's length,
and the root they give); missing or damaged ones are rebuilt from the lines.
A proof is checked against the roots before it is used; one that does not
verify means the stored hashes were damaged while running, and they are
rebuilt (in a worker thread, while new nodes wait in memory).

New nodes are kept in memory and written (without fsync: they can always be
rebuilt) before a proof is made.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import trio

from ..._audit_leaves import iter_leaves
from ..._errors import DamagedError
from ...proto.tlog import (
    HASH_SIZE,
    CompactRange,
    ProofError,
    consistency_proof,
    leaf_hash,
    root_from_reader,
    verify_consistency,
)

log = logging.getLogger("brokerd")

TILES = "tiles"


class StoreDamaged(DamagedError):
    pass


def _level_name(level: int) -> str:
    return f"level-{level:02d}"


def build_tiles(audit_dir: Path, target: Path, size: int | None = None) -> CompactRange:
    """Write every level file for the first `size` complete lines (all when None)
    into `target` (made empty first); return the tree.  Blocking."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(mode=0o700, parents=True)
    tree = CompactRange()
    buffers: dict[int, bytearray] = {}
    files: dict[int, int] = {}

    def flush() -> None:
        for level, data in buffers.items():
            if level not in files:
                files[level] = os.open(target / _level_name(level),
                                       os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                                       0o600)
            os.write(files[level], data)
        buffers.clear()

    try:
        for _, _, line in iter_leaves(audit_dir):
            if size is not None and tree.size >= size:
                break
            for level, _, node in tree.append(leaf_hash(line)):
                buffers.setdefault(level, bytearray()).extend(node)
            if len(buffers.get(0, b"")) >= 1 << 20:
                flush()
        flush()
    finally:
        for fd in files.values():
            os.close(fd)
    if size is not None and tree.size != size:
        raise StoreDamaged(f"the log has {tree.size} lines, fewer than {size}")
    return tree


def scan_tree(audit_dir: Path) -> CompactRange:
    """The tree of the log's complete lines, nothing stored.  Blocking."""
    tree = CompactRange()
    for _, _, line in iter_leaves(audit_dir):
        tree.append(leaf_hash(line))
    return tree


class TreeStore:
    """The tree and its stored hashes; every method runs on brokerd's trio thread
    (`rebuild` hands the file work to a worker thread)."""

    def __init__(self, audit_dir: Path, tree: CompactRange) -> None:
        self.audit_dir = audit_dir
        self.directory = audit_dir / TILES
        self.tree = tree
        self._pending: dict[int, bytearray] = {}
        self._fds: dict[int, int] = {}
        self._rebuilding = False
        self.rebuilt_at: int | None = None
        """The tree size at the last rebuild while running."""

    @classmethod
    def open(cls, audit_dir: Path) -> TreeStore:
        """Recompute the tree from the lines; check the stored hashes, rebuild them
        when missing or damaged.  Blocking (start-up)."""
        tree = scan_tree(audit_dir)
        store = cls(audit_dir, tree)
        problem = store._check()
        if problem is not None:
            log.warning("audit/tiles: %s; rebuilding the stored hashes from the lines", problem)
            store.close()
            rebuilt = build_tiles(audit_dir, audit_dir / (TILES + ".new"), tree.size)
            _swap(audit_dir)
            if rebuilt.root() != tree.root():  # pragma: no cover - the log changed under us
                raise StoreDamaged("the log changed while its hashes were rebuilt")
            again = store._check()
            if again is not None:
                raise StoreDamaged(f"audit/tiles is still wrong after a rebuild: {again}")
        return store

    @property
    def size(self) -> int:
        return self.tree.size

    def root(self) -> bytes:
        return self.tree.root()

    def append_lines(self, lines: list[bytes]) -> None:
        pending = self._pending
        for line in lines:
            for level, _, node in self.tree.append(leaf_hash(line)):
                buffer = pending.get(level)
                if buffer is None:
                    buffer = pending[level] = bytearray()
                buffer.extend(node)

    def flush(self) -> None:
        """Write the nodes kept in memory (not while a rebuild runs)."""
        if self._rebuilding or not self._pending:
            return
        for level, data in self._pending.items():
            os.write(self._fd(level), data)
        self._pending = {}

    def read(self, level: int, index: int) -> bytes:
        data = os.pread(self._fd(level), HASH_SIZE, index * HASH_SIZE)
        if len(data) != HASH_SIZE:
            raise StoreDamaged(f"level {level} has no node {index}")
        return data

    def proof(self, old: int, new: int, old_root: bytes | None, new_root: bytes) -> list[bytes]:
        """A consistency proof, checked against the roots (the old root from the
        stored hashes when not given).  Raises StoreDamaged."""
        self.flush()
        try:
            if old_root is None:
                old_root = root_from_reader(old, self.read) if old else b""
            nodes = consistency_proof(old, new, self.read)
        except (OSError, ProofError) as exc:
            raise StoreDamaged(str(exc)) from exc
        if not verify_consistency(old, new, old_root, new_root, nodes) and old != 0:
            raise StoreDamaged(f"the proof from {old} to {new} does not verify")
        return nodes

    async def rebuild(self) -> None:
        """Rebuild the stored hashes from the lines in a worker thread."""
        if self._rebuilding:
            return
        self.flush()
        size = self.tree.size
        self.rebuilt_at = size
        self._rebuilding = True
        try:
            self.close()
            await trio.to_thread.run_sync(build_tiles, self.audit_dir,
                                          self.audit_dir / (TILES + ".new"), size)
            await trio.to_thread.run_sync(_swap, self.audit_dir)
        finally:
            self._rebuilding = False
        self.flush()
        log.warning("audit/tiles: rebuilt from the lines (%d lines)", size)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def _fd(self, level: int) -> int:
        fd = self._fds.get(level)
        if fd is None:
            self.directory.mkdir(mode=0o700, exist_ok=True)
            fd = self._fds[level] = os.open(
                self.directory / _level_name(level),
                os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        return fd

    def _check(self) -> str | None:
        size = self.tree.size
        try:
            for level in range(64):
                path = self.directory / _level_name(level)
                expected = (size >> level) * HASH_SIZE
                try:
                    actual = path.stat().st_size
                except FileNotFoundError:
                    actual = 0
                if actual < expected:
                    return f"level {level} is missing hashes"
                if actual > expected:  # nodes past the end (a crash, a cut log): cut them
                    os.truncate(path, expected)
            if size and root_from_reader(size, self.read) != self.tree.root():
                return "the stored hashes do not give the lines' root"
        except (OSError, StoreDamaged) as exc:
            return f"cannot be read ({exc})"
        return None


def _swap(audit_dir: Path) -> None:
    new, current, old = (audit_dir / (TILES + ".new"), audit_dir / TILES,
                         audit_dir / (TILES + ".old"))
    shutil.rmtree(old, ignore_errors=True)
    if current.exists():
        os.replace(current, old)
    os.replace(new, current)
    shutil.rmtree(old, ignore_errors=True)
