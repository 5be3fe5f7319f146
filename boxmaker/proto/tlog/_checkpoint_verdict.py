"""Judging the audit log against its witnessed checkpoints (10-checkpoints
"Verifying").  Pure: the caller found the checkpoints and computed the log's
roots at their sizes.

- Only checkpoints of the log's origin with a valid signature of the log's key
  count.  The newest one cosigned by the witness key is *the* cosigned
  checkpoint; none: ``no_checkpoint``.
- ``fork``: two such checkpoints of one size with different roots (from any
  source): the key signed two histories.  (A log that differs from the
  cosigned checkpoint at its size is ``rewritten``, even when brokerd, restarted
  on it, signed the new history at another size.)
- ``truncated``: the log has fewer lines than the cosigned size.
- ``rewritten``: the log's first ``size`` lines have another root, or a
  ``break`` or ``recovery`` record lies at or before the cosigned size.
- ``ok`` otherwise; accepted breaks after the cosigned size are not witnessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from ._checkpoint import SignedCheckpoint, cosigned_at, log_signature_ok
from ._note import NoteError, VerifierKey, b64

Verdict = Literal["ok", "truncated", "rewritten", "fork", "no_checkpoint"]


@attrs.frozen(kw_only=True)
class Candidate:
    source: str
    """Where it was found: a file of audit/checkpoints/, or the witness's URL."""
    signed: SignedCheckpoint


@attrs.frozen(kw_only=True)
class CheckpointFinding:
    verdict: Verdict
    size: int | None
    root: bytes | None
    witness: str
    source: str | None
    detail: str

    def json(self) -> dict[str, object]:
        return {"size": self.size, "root": None if self.root is None else b64(self.root),
                "witness": self.witness, "verdict": self.verdict}


def valid_candidates(candidates: Sequence[Candidate], log_key: VerifierKey) -> list[Candidate]:
    """Those of the log's origin that the log's key signed (a bad signature line
    of that key disqualifies the note)."""
    out = []
    for candidate in candidates:
        if candidate.signed.checkpoint.origin != log_key.name:
            continue
        try:
            if log_signature_ok(candidate.signed, log_key):
                out.append(candidate)
        except NoteError:
            continue
    return out


def _cosigned(candidate: Candidate, witness: VerifierKey) -> bool:
    try:
        return cosigned_at(candidate.signed, witness) is not None
    except NoteError:
        return False


def sizes_needed(candidates: Sequence[Candidate]) -> set[int]:
    return {c.signed.checkpoint.size for c in candidates}


def judge(
    candidates: Sequence[Candidate],
    *,
    log_key: VerifierKey,
    witness: VerifierKey,
    log_size: int,
    log_roots: dict[int, bytes],
    resets: Sequence[int],
) -> CheckpointFinding:
    """`log_roots`: the log's root at each candidate size it reaches; `resets`:
    the 1-based positions of the log's `break` and `recovery` records."""
    valid = valid_candidates(candidates, log_key)
    cosigned = [c for c in valid if _cosigned(c, witness)]
    if not cosigned:
        return CheckpointFinding(verdict="no_checkpoint", size=None, root=None,
                                 witness=witness.name, source=None,
                                 detail="no checkpoint of this log cosigned by that key")
    best = max(cosigned, key=lambda c: c.signed.checkpoint.size)
    size, root = best.signed.checkpoint.size, best.signed.checkpoint.root

    def finding(verdict: Verdict, detail: str) -> CheckpointFinding:
        return CheckpointFinding(verdict=verdict, size=size, root=root, witness=witness.name,
                                 source=best.source, detail=detail)

    by_size: dict[int, Candidate] = {}
    for candidate in valid:
        cp = candidate.signed.checkpoint
        seen = by_size.setdefault(cp.size, candidate)
        if seen.signed.checkpoint.root != cp.root:
            return finding("fork", f"two checkpoints of size {cp.size} with different roots "
                           f"({seen.source} and {candidate.source})")
    matches_log = log_size >= size and log_roots.get(size) == root
    if log_size < size:
        return finding("truncated", f"the log has {log_size} lines, the witness cosigned "
                       f"{size}")
    if not matches_log:
        return finding("rewritten", f"the log's first {size} lines are not those the "
                       "witness cosigned")
    inside = [position for position in resets if position <= size]
    if inside:
        return finding("rewritten", f"a break or recovery record at line {inside[0]} of the "
                       f"log lies within the cosigned size {size}")
    return finding("ok", f"the log's first {size} lines are those the witness cosigned")
