"""The witness's decision on one add-checkpoint request (C2SP tlog-witness,
10-checkpoints "Witnesses").  Pure: no I/O, no clock (the time is passed in).

Checks, in order: the body is well formed (else 400); the origin is one it
witnesses (else 404); a signature from a key it trusts for that origin
verifies (else 403); ``old`` is not above the checkpoint's size (else 400);
``old`` is the size it last cosigned (else 409 with that size); a size-0
checkpoint has the empty root, no proof comes with ``old 0`` (else 422); equal
sizes have equal roots (else 409, 10-checkpoints); the consistency proof
verifies (else 422).  Then it cosigns, and the caller must save the new state
durably before it answers.
"""

from __future__ import annotations

import attrs

from ..proto.tlog import (
    SIZE_CONTENT_TYPE,
    BadSignature,
    Checkpoint,
    Malformed,
    Note,
    Signer,
    VerifierKey,
    cosign_text,
    empty_root_ok,
    parse_add_checkpoint,
    verified_by,
    verify_consistency,
)

TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


@attrs.frozen(kw_only=True)
class Cosigned:
    """What the witness keeps per origin: the newest checkpoint it cosigned, with
    the log signatures it verified and its own cosignature."""

    checkpoint: Checkpoint
    note: bytes


@attrs.frozen(kw_only=True)
class Outcome:
    status: int
    body: bytes
    content_type: str = TEXT_CONTENT_TYPE
    save: Cosigned | None = None
    """The new state to make durable before answering (200 only)."""


def _text(status: int, message: str) -> Outcome:
    return Outcome(status=status, body=(message + "\n").encode("utf-8"))


def _conflict(size: int) -> Outcome:
    return Outcome(status=409, body=f"{size}\n".encode("ascii"), content_type=SIZE_CONTENT_TYPE)


def decide(
    body: bytes,
    *,
    logs: dict[str, list[VerifierKey]],
    state: dict[str, Cosigned],
    signer: Signer,
    now: int,
) -> Outcome:
    """The answer to one add-checkpoint body, and the state to save for a 200."""
    try:
        request = parse_add_checkpoint(body)
    except Malformed as exc:
        return _text(400, f"malformed: {exc}")
    checkpoint = request.signed.checkpoint
    keys = logs.get(checkpoint.origin)
    if keys is None:
        return _text(404, "unknown origin")
    try:
        verified = verified_by(request.signed.note, keys)
    except BadSignature:
        return _text(403, "a signature from a trusted key does not verify")
    if not verified:
        return _text(403, "no signature from a key trusted for this origin")
    if request.old > checkpoint.size:
        return _text(400, "old is greater than the checkpoint's size")
    current = state.get(checkpoint.origin)
    current_size = current.checkpoint.size if current is not None else 0
    if request.old != current_size:
        return _conflict(current_size)
    if not empty_root_ok(checkpoint):
        return _text(422, "a checkpoint of size 0 has the empty tree's root")
    if request.old == 0:
        if request.proof:
            return _text(422, "no proof comes with old 0")
    elif current is not None and request.old == checkpoint.size:
        if request.proof or current.checkpoint.root != checkpoint.root:
            return _conflict(current_size)
    elif current is not None and not verify_consistency(
        request.old, checkpoint.size, current.checkpoint.root, checkpoint.root,
        request.proof,
    ):
        return _text(422, "the consistency proof does not verify")
    cosignature = cosign_text(request.signed.note.text, signer, now)
    kept = tuple(line for line in request.signed.note.signatures
                 if any(line.name == k.name and line.id == k.id for k in verified))
    note = Note(text=request.signed.note.text, signatures=(*kept, cosignature))
    return Outcome(status=200, body=cosignature.text().encode("utf-8"),
                   save=Cosigned(checkpoint=checkpoint, note=note.encode()))
