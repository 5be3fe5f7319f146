"""The C2SP tlog-witness add-checkpoint body: ``old <size>\\n``, at most 63
base64 proof lines, an empty line, then the signed checkpoint.  Shared by the
witness and brokerd's pushers.  Pure: no I/O."""

from __future__ import annotations

import attrs

from ..._errors import PeerError
from ._checkpoint import CheckpointError, SignedCheckpoint, parse_signed_checkpoint, parse_size
from ._merkle import HASH_SIZE
from ._note import NoteError, b64, strict_b64decode

MAX_PROOF_LINES = 63
SIZE_CONTENT_TYPE = "text/x.tlog.size"


@attrs.frozen(kw_only=True)
class AddCheckpoint:
    old: int
    proof: tuple[bytes, ...]
    signed: SignedCheckpoint


class Malformed(PeerError, ValueError):
    pass


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """``old <size>\\n``, proof lines, an empty line, a signed checkpoint."""
    first, newline, rest = body.partition(b"\n")
    if not newline or not first.startswith(b"old "):
        raise Malformed("the body starts with 'old <size>'")
    try:
        old = parse_size(first[4:].decode("ascii"))
    except (UnicodeDecodeError, CheckpointError) as exc:
        raise Malformed("'old' is not a tree size") from exc
    proof: list[bytes] = []
    while True:
        line, newline, rest = rest.partition(b"\n")
        if not newline:
            raise Malformed("no empty line before the checkpoint")
        if not line:
            break
        if len(proof) == MAX_PROOF_LINES:
            raise Malformed(f"more than {MAX_PROOF_LINES} proof lines")
        try:
            node = strict_b64decode(line.decode("ascii"))
        except (UnicodeDecodeError, NoteError) as exc:
            raise Malformed("a proof line is not base64") from exc
        if len(node) != HASH_SIZE:
            raise Malformed("a proof line is not a 32-byte hash")
        proof.append(node)
    try:
        signed = parse_signed_checkpoint(rest)
    except NoteError as exc:
        raise Malformed(f"not a signed checkpoint: {exc}") from exc
    return AddCheckpoint(old=old, proof=tuple(proof), signed=signed)


def encode_add_checkpoint(old: int, proof: list[bytes], signed_note: bytes) -> bytes:
    lines = [f"old {old}"] + [b64(node) for node in proof]
    return ("\n".join(lines) + "\n\n").encode("ascii") + signed_note
