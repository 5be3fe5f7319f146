"""C2SP tlog-checkpoint: the note text ``<origin>\\n<size>\\n<base64 root>\\n``.

Extension lines are accepted when parsing (non-empty, at most
`MAX_EXTENSIONS`) and never written by boxmaker.  Pure: no I/O.
"""

from __future__ import annotations

import re

import attrs

from ._merkle import EMPTY_ROOT, HASH_SIZE, MAX_TREE_SIZE
from ._note import (
    Note,
    NoteError,
    Signer,
    VerifierKey,
    b64,
    parse_note,
    sign_text,
    strict_b64decode,
    verified_by,
)

MAX_EXTENSIONS = 16
MAX_COSIGNATURE_AHEAD_S = 600
"""How far ahead of brokerd's clock a cosignature's time may be (clock skew
between two machines); a later one is refused (issue 22 item 11)."""
LAST_TIMESTAMP = 253402300799
"""9999-12-31T23:59:59Z: the last second a wire timestamp can show."""
MAX_ORIGIN_BYTES = 255
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")


class CheckpointError(NoteError):
    """A note text that is not a checkpoint."""


@attrs.frozen(kw_only=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def body(self) -> bytes:
        lines = [self.origin, str(self.size), b64(self.root), *self.extensions]
        return ("\n".join(lines) + "\n").encode("utf-8")


def check_origin(origin: str) -> str:
    if (not origin or len(origin.encode("utf-8")) > MAX_ORIGIN_BYTES
            or any(c.isspace() or c == "+" or ord(c) < 0x20 for c in origin)):
        raise CheckpointError(f"{origin!r} is not an origin (non-empty, no spaces, no '+', "
                              f"at most {MAX_ORIGIN_BYTES} bytes)")
    return origin


def parse_size(text: str) -> int:
    """A tree size: decimal, no leading zeroes, at most 2**63 - 1."""
    if not _SIZE.fullmatch(text) or int(text) > MAX_TREE_SIZE:
        raise CheckpointError(f"{text[:40]!r} is not a tree size")
    return int(text)


def parse_checkpoint_body(text: bytes) -> Checkpoint:
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError("a checkpoint is UTF-8") from exc
    if not decoded.endswith("\n"):
        raise CheckpointError("a checkpoint ends with a newline")
    lines = decoded[:-1].split("\n")
    if len(lines) < 3 or len(lines) > 3 + MAX_EXTENSIONS or any(not line for line in lines):
        raise CheckpointError("a checkpoint is an origin, a size, a root and "
                              f"at most {MAX_EXTENSIONS} non-empty extension lines")
    origin = check_origin(lines[0])
    size = parse_size(lines[1])
    try:
        root = strict_b64decode(lines[2])
    except NoteError as exc:
        raise CheckpointError("the root hash is not base64") from exc
    if len(root) != HASH_SIZE:
        raise CheckpointError("the root hash is not 32 bytes")
    return Checkpoint(origin=origin, size=size, root=root, extensions=tuple(lines[3:]))


@attrs.frozen(kw_only=True)
class SignedCheckpoint:
    checkpoint: Checkpoint
    note: Note

    def encode(self) -> bytes:
        return self.note.encode()


def parse_signed_checkpoint(data: bytes) -> SignedCheckpoint:
    """A signed note whose text is a checkpoint (signatures not verified)."""
    note = parse_note(data)
    return SignedCheckpoint(checkpoint=parse_checkpoint_body(note.text), note=note)


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> SignedCheckpoint:
    text = checkpoint.body()
    return SignedCheckpoint(checkpoint=checkpoint,
                            note=Note(text=text, signatures=(sign_text(text, signer),)))


def empty_root_ok(checkpoint: Checkpoint) -> bool:
    """A checkpoint of size 0 must carry the empty tree's root."""
    return checkpoint.size != 0 or checkpoint.root == EMPTY_ROOT


def log_signature_ok(signed: SignedCheckpoint, key: VerifierKey) -> bool:
    """Signed by `key` (raises BadSignature for a line of that key that fails)."""
    return key in verified_by(signed.note, [key])


def cosigned_at(signed: SignedCheckpoint, witness: VerifierKey) -> int | None:
    """The cosignature time of `witness` on the checkpoint, or None when it has none.
    Raises BadSignature for a line of that key that does not verify."""
    found = verified_by(signed.note, [witness])
    return found.get(witness) if witness in found else None


def cosignature_time_problem(when: int | None, now: float) -> str | None:
    """Why a cosignature time `when` is refused at `now` (seconds since the epoch),
    or None when it is usable: it must be there and be at most
    MAX_COSIGNATURE_AHEAD_S ahead of `now` (and never after LAST_TIMESTAMP)."""
    if when is None:
        return "the cosignature has no time"
    if when > LAST_TIMESTAMP or when > now + MAX_COSIGNATURE_AHEAD_S:
        return (f"the cosignature's time {when} is more than {MAX_COSIGNATURE_AHEAD_S} s "
                "ahead of this machine's clock; refused, nothing of it kept (a lying "
                "witness, or a clock wrong on one side)")
    return None
