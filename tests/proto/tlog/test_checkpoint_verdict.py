"""The verdicts of `bxctl audit verify --witness-key` (10-checkpoints "Verifying")."""

from __future__ import annotations

from boxmaker.proto.tlog._checkpoint import SignedCheckpoint
from boxmaker.proto.tlog._checkpoint_verdict import Candidate, judge
from boxmaker.proto.tlog._note import Note, cosign_text
from tests.fakes.tlog import TestLog, log_signer, witness_signer

LOG = log_signer()
WITNESS = witness_signer()
OTHER_WITNESS = witness_signer(seed=3, name="other.test/w2")


def cosigned(log: TestLog, size: int, witness=WITNESS) -> SignedCheckpoint:  # type: ignore[no-untyped-def]
    signed = log.checkpoint(size)
    line = cosign_text(signed.note.text, witness, 1_700_000_000)
    return SignedCheckpoint(checkpoint=signed.checkpoint,
                            note=Note(text=signed.note.text,
                                      signatures=(*signed.note.signatures, line)))


def run(log: TestLog, candidates: list[SignedCheckpoint], resets: list[int] = ()):  # type: ignore[no-untyped-def,assignment]
    items = [Candidate(source=f"c{i}", signed=s) for i, s in enumerate(candidates)]
    roots = {s.checkpoint.size: log.roots[s.checkpoint.size] for s in candidates
             if s.checkpoint.size <= log.tree.size}
    return judge(items, log_key=LOG.verifier, witness=WITNESS.verifier, log_size=log.tree.size,
                 log_roots=roots, resets=list(resets))


def test_verdicts() -> None:
    log = TestLog(LOG)
    log.append(20)
    assert run(log, []).verdict == "no_checkpoint"
    assert run(log, [log.checkpoint(20)]).verdict == "no_checkpoint"  # not cosigned
    assert run(log, [cosigned(log, 20, OTHER_WITNESS)]).verdict == "no_checkpoint"
    found = run(log, [cosigned(log, 12), cosigned(log, 20), log.checkpoint(20)])
    assert (found.verdict, found.size) == ("ok", 20)
    # truncated: the witness saw more than the log holds
    longer = log.fork()
    longer.append(5)
    short = run(log, [cosigned(longer, 25)])
    assert (short.verdict, short.size) == ("truncated", 25)
    # rewritten: same size, other lines
    other = TestLog(LOG, prefix=b"other")
    other.append(20)
    assert run(other, [cosigned(log, 20)]).verdict == "rewritten"
    # fork: two signed checkpoints of one size with different roots
    assert run(log, [cosigned(log, 20), other.checkpoint(20)]).verdict == "fork"
    # a break or recovery at or before the cosigned size is rewritten, after it is fine
    assert run(log, [cosigned(log, 12)], resets=[12]).verdict == "rewritten"
    assert run(log, [cosigned(log, 12)], resets=[13]).verdict == "ok"
    # a checkpoint signed by another key does not count, even cosigned
    stranger = TestLog(log_signer(seed=4))
    stranger.append(20)
    assert run(log, [cosigned(stranger, 20)]).verdict == "no_checkpoint"
