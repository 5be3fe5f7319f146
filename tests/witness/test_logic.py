"""The witness's decisions (C2SP tlog-witness status codes, 10-checkpoints)."""

from __future__ import annotations

from boxmaker.proto.tlog._checkpoint import Checkpoint, cosigned_at, parse_signed_checkpoint
from boxmaker.proto.tlog._merkle import EMPTY_ROOT
from boxmaker.proto.tlog._note import Note, parse_signature_lines, verify_line
from boxmaker.proto.tlog._witness_wire import encode_add_checkpoint
from boxmaker.witness._logic import Cosigned, decide
from tests.fakes.tlog import ORIGIN, TestLog, log_signer, witness_signer

WITNESS = witness_signer()
LOG_KEY = log_signer()


def run(body: bytes, state: dict[str, Cosigned], now: int = 1_700_000_000) -> tuple[int, bytes]:
    outcome = decide(body, logs={ORIGIN: [LOG_KEY.verifier]}, state=state, signer=WITNESS,
                     now=now)
    if outcome.save is not None:
        assert outcome.status == 200
        state[outcome.save.checkpoint.origin] = outcome.save
    return outcome.status, outcome.body


def test_first_checkpoint_then_extensions_are_cosigned() -> None:
    log, state = TestLog(LOG_KEY), {}
    log.append(5)
    status, body = run(log.add_body(0), state)
    assert status == 200
    (line,) = parse_signature_lines(body)
    assert verify_line(log.checkpoint().note.text, line, WITNESS.verifier) == 1_700_000_000
    for grow in (1, 2, 7, 50, 1):
        old = log.tree.size
        log.append(grow)
        assert run(log.add_body(old), state)[0] == 200
    kept = parse_signed_checkpoint(state[ORIGIN].note)
    assert kept.checkpoint.size == log.tree.size
    assert cosigned_at(kept, WITNESS.verifier) is not None


def test_wrong_old_size_is_409_with_the_witness_size() -> None:
    log, state = TestLog(LOG_KEY), {}
    log.append(10)
    assert run(log.add_body(0), state)[0] == 200
    log.append(3)
    status, body = run(log.add_body(0), state)
    assert (status, body) == (409, b"10\n")
    outcome = decide(log.add_body(4), logs={ORIGIN: [LOG_KEY.verifier]}, state=state,
                     signer=WITNESS, now=1)
    assert (outcome.status, outcome.content_type) == (409, "text/x.tlog.size")


def test_rollback_refused() -> None:
    log, state = TestLog(LOG_KEY), {}
    log.append(10)
    assert run(log.add_body(0), state)[0] == 200
    assert run(log.add_body(0, 6), state) == (409, b"10\n")
    # old > size is 400
    assert run(encode_add_checkpoint(10, [], log.checkpoint(6).encode()), state)[0] == 400
    assert parse_signed_checkpoint(state[ORIGIN].note).checkpoint.size == 10


def test_fork_refused() -> None:
    log, state = TestLog(LOG_KEY), {}
    log.append(10)
    assert run(log.add_body(0), state)[0] == 200
    fork = TestLog(LOG_KEY, prefix=b"other")
    fork.append(12)
    assert run(fork.add_body(10), state)[0] == 422  # the proof cannot verify
    same_size = TestLog(LOG_KEY, prefix=b"other")
    same_size.append(10)
    assert run(same_size.add_body(10), state) == (409, b"10\n")  # equal sizes, other root
    assert run(log.add_body(10), state)[0] == 200  # the same checkpoint again is fine
    assert parse_signed_checkpoint(state[ORIGIN].note).checkpoint.root == log.roots[10]


def test_unknown_origin_404_and_bad_signatures_403() -> None:
    state: dict[str, Cosigned] = {}
    other = TestLog(log_signer(origin="someone/else"), origin="someone/else")
    other.append(2)
    assert run(other.add_body(0), state)[0] == 404
    stranger = TestLog(log_signer(seed=8))
    stranger.append(2)
    assert run(stranger.add_body(0), state)[0] == 403
    log = TestLog(LOG_KEY)
    log.append(2)
    body = log.add_body(0)
    assert run(body.replace(b"\n2\n", b"\n3\n"), state)[0] == 403  # signature over other text
    assert state == {}


def test_malformed_bodies_400_and_bad_proofs_422() -> None:
    log, state = TestLog(LOG_KEY), {}
    log.append(4)
    for bad in (b"", b"old 01\n\n" + log.checkpoint().encode(), b"new 0\n\n",
                b"old 0\n" + log.checkpoint().encode(),
                b"old 0\nnot-base64\n\n" + log.checkpoint().encode(),
                b"old 0\n" + b"AAAA\n" + b"\n" + log.checkpoint().encode(),
                b"old 0\n\n" + log.checkpoint().note.text):
        assert run(bad, state)[0] == 400, bad
    many = encode_add_checkpoint(0, [bytes(32)] * 64, log.checkpoint().encode())
    assert run(many, state)[0] == 400
    with_proof = encode_add_checkpoint(0, [bytes(32)], log.checkpoint().encode())
    assert run(with_proof, state)[0] == 422
    assert run(log.add_body(0), state)[0] == 200
    log.append(3)
    wrong = encode_add_checkpoint(4, [bytes(32)] * 3, log.checkpoint().encode())
    assert run(wrong, state)[0] == 422
    assert state[ORIGIN].checkpoint.size == 4


def test_size_zero_needs_the_empty_root() -> None:
    state: dict[str, Cosigned] = {}
    from boxmaker.proto.tlog._checkpoint import sign_checkpoint

    bad = sign_checkpoint(Checkpoint(origin=ORIGIN, size=0, root=bytes(32)), LOG_KEY)
    assert run(encode_add_checkpoint(0, [], bad.encode()), state)[0] == 422
    good = sign_checkpoint(Checkpoint(origin=ORIGIN, size=0, root=EMPTY_ROOT), LOG_KEY)
    assert run(encode_add_checkpoint(0, [], good.encode()), state)[0] == 200


def test_kept_note_drops_unverified_signatures() -> None:
    log, state = TestLog(LOG_KEY), {}
    log.append(3)
    signed = log.checkpoint()
    extra = TestLog(log_signer(seed=5)).checkpoint(0).note.signatures[0]
    note = Note(text=signed.note.text, signatures=(*signed.note.signatures, extra))
    assert run(encode_add_checkpoint(0, [], note.encode()), state)[0] == 200
    kept = parse_signed_checkpoint(state[ORIGIN].note).note.signatures
    assert [s.name for s in kept] == [ORIGIN, WITNESS.name]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 6), st.integers(0, 12)),
                min_size=1, max_size=25))
def test_random_requests_never_cosign_a_rollback_or_two_roots(
    steps: list[tuple[int, int, int]],
) -> None:
    """Three histories share a prefix and diverge; requests from any of them, with
    any old size, in any order: what the witness cosigns only ever grows, and never
    two roots for one size."""
    base = TestLog(LOG_KEY)
    base.append(4)
    logs = [base.fork() for _ in range(3)]
    for index, log in enumerate(logs):
        log.append(12, tag=b" h%d" % index)
    state: dict[str, Cosigned] = {}
    cosigned: dict[int, bytes] = {}
    last = 0
    for which, old_pick, size_pick in steps:
        log = logs[which]
        size = min(size_pick + 4, log.tree.size)
        current = state[ORIGIN].checkpoint.size if ORIGIN in state else 0
        old = current if old_pick == 0 else min(old_pick, size)
        from boxmaker.proto.tlog._merkle import consistency_proof

        proof = consistency_proof(old, size, log.read) if old <= size else []
        body = encode_add_checkpoint(old, proof, log.checkpoint(size).encode())
        status, _ = run(body, state)
        if old > size:
            assert status == 400
        if status == 200:
            got = state[ORIGIN].checkpoint
            assert got.size >= last
            assert cosigned.setdefault(got.size, got.root) == got.root
            last = got.size
