"""The witness's state directory: one file per witnessed log, named by the
SHA-256 of its origin, holding the newest cosigned checkpoint (the log's
signature and the witness's cosignature).  Replaced atomically (temporary
file, fsync, rename, fsync of the directory) before the witness answers.

At start every file is read back and checked (it parses, its origin is the
one its name says, the witness's own cosignature verifies): a damaged state
refuses the start, since a witness that forgot a log could cosign a rollback.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .._atomic_file import replace_file
from .._errors import DamagedError
from .._state_files import read_regular
from ..proto.tlog import (
    MAX_NOTE_BYTES,
    NoteError,
    VerifierKey,
    cosigned_at,
    parse_signed_checkpoint,
)
from ._logic import Cosigned

SUFFIX = ".checkpoint"


class StateDamaged(DamagedError):
    """A state file cannot be trusted; the witness refuses to start."""


def state_name(origin: str) -> str:
    return hashlib.sha256(origin.encode("utf-8")).hexdigest() + SUFFIX


def load_state(directory: Path, own_key: VerifierKey) -> dict[str, Cosigned]:
    """Every log's newest cosigned checkpoint.  Raises StateDamaged, OSError."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    state: dict[str, Cosigned] = {}
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(SUFFIX):
            continue
        path = directory / entry
        data = read_regular(path, MAX_NOTE_BYTES)
        try:
            signed = parse_signed_checkpoint(data)
            timestamp = cosigned_at(signed, own_key)
        except NoteError as exc:
            raise StateDamaged(f"{path}: {exc}") from exc
        origin = signed.checkpoint.origin
        if timestamp is None or state_name(origin) != entry:
            raise StateDamaged(f"{path}: not a checkpoint this witness cosigned for its origin")
        state[origin] = Cosigned(checkpoint=signed.checkpoint, note=data)
    return state


def save_state(directory: Path, cosigned: Cosigned) -> None:
    """Make `cosigned` the durable state of its log.  Raises OSError."""
    replace_file(directory / state_name(cosigned.checkpoint.origin), cosigned.note)
