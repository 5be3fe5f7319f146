"""`audit/checkpoints/` (10-checkpoints): the newest signed checkpoint, and the
newest checkpoint cosigned by each witness (the log's signature and the
witness's cosignature), each replaced atomically.  Written by brokerd, read
by brokerd at start and by `bxctl audit verify`."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ._atomic_file import replace_file
from ._state_files import StateFileTooBig, read_regular
from .proto.tlog import MAX_NOTE_BYTES, VerifierKey

CHECKPOINTS = "checkpoints"
SUFFIX = ".checkpoint"
SIGNED = "signed" + SUFFIX
MAX_FILES = 64


def checkpoints_dir(audit_dir: Path) -> Path:
    return audit_dir / CHECKPOINTS


def cosigned_name(witness: VerifierKey) -> str:
    return "cosigned-" + hashlib.sha256(witness.text().encode()).hexdigest()[:16] + SUFFIX


def save_checkpoint(audit_dir: Path, name: str, note: bytes, *, fsync: bool) -> None:
    directory = checkpoints_dir(audit_dir)
    directory.mkdir(mode=0o700, exist_ok=True)
    replace_file(directory / name, note, fsync=fsync)


def read_checkpoint(audit_dir: Path, name: str) -> bytes | None:
    try:
        return _read_bounded(checkpoints_dir(audit_dir) / name)
    except FileNotFoundError:
        return None


def read_all(audit_dir: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of every ``*.checkpoint`` file (at most MAX_FILES, name order).
    A file too big to be a note is returned empty (it will not parse); one that
    is not a regular file raises NotRegularFile."""
    directory = checkpoints_dir(audit_dir)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(SUFFIX))
    except FileNotFoundError:
        return []
    out = []
    for name in names[:MAX_FILES]:
        try:
            out.append((name, _read_bounded(directory / name)))
        except FileNotFoundError:
            continue
    return out


def _read_bounded(path: Path) -> bytes:
    """Raises FileNotFoundError, NotRegularFile (a FIFO, a link, ...), OSError."""
    try:
        return read_regular(path, MAX_NOTE_BYTES)
    except StateFileTooBig:
        return b""
