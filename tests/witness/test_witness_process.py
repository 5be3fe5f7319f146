"""The real witness process on loopback: crashes, races, restarts (10-checkpoints)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from boxmaker.proto.tlog._checkpoint import cosigned_at, parse_signed_checkpoint
from boxmaker.proto.tlog._note import parse_signature_lines, parse_verifier_key, verify_line
from boxmaker.witness._serve import TEST_AFTER_SAVE_FIFO
from tests.fakes.tlog import ORIGIN, TestLog, log_signer
from tests.fakes.witness_process import WitnessProcess, wait_fifo

LOG_KEY = log_signer()


@pytest.fixture
def witness(tmp_path: Path):  # type: ignore[no-untyped-def]
    process = WitnessProcess(tmp_path / "w", {ORIGIN: LOG_KEY.verifier.text()})
    yield process
    process.kill()


def latest(witness: WitnessProcess) -> tuple[int, bytes] | None:
    status, body = witness.get("/latest/" + quote(ORIGIN, safe=""))
    if status == 404:
        return None
    assert status == 200
    signed = parse_signed_checkpoint(body)
    assert cosigned_at(signed, parse_verifier_key(witness.key())) is not None
    return signed.checkpoint.size, signed.checkpoint.root


def test_restart_keeps_state(witness: WitnessProcess) -> None:
    vkey = parse_verifier_key(witness.key())
    log = TestLog(LOG_KEY)
    log.append(20)
    witness.start()
    status, body, _ = witness.post(log.add_body(0))
    assert status == 200
    (line,) = parse_signature_lines(body)
    assert verify_line(log.checkpoint().note.text, line, vkey) is not None
    witness.stop()
    witness.start()
    assert latest(witness) == (20, log.roots[20])
    status, body, kind = witness.post(log.add_body(0, 5))
    assert (status, body, kind) == (409, b"20\n", "text/x.tlog.size")
    # a rollback with the right old size is 400 (old > size), a fork 422 or 409
    fork = TestLog(LOG_KEY, prefix=b"fork")
    fork.append(25)
    assert witness.post(fork.add_body(20))[0] == 422
    fork_same = TestLog(LOG_KEY, prefix=b"fork")
    fork_same.append(20)
    assert witness.post(fork_same.add_body(20))[0] == 409
    assert witness.get("/latest/unknown%2Forigin")[0] == 404
    assert latest(witness) == (20, log.roots[20])
    # C2SP's monitoring endpoint gives the same note; other methods and paths are refused
    import hashlib

    by_hash = witness.get(f"/{hashlib.sha256(ORIGIN.encode()).hexdigest()}/checkpoint")
    assert by_hash == witness.get("/latest/" + quote(ORIGIN, safe=""))
    assert witness.get("/add-checkpoint")[0] == 405
    assert witness.get("/latest/%ff")[0] in (400, 404)
    assert witness.post(b"old 0\n" * 100_000)[0] in (400, 413)


def test_kill_9_between_save_and_answer(witness: WitnessProcess, tmp_path: Path) -> None:
    """32 rounds: each saves, is killed with SIGKILL before it answers, and on
    restart holds exactly the checkpoint it saved; the log's client then goes on
    from the size the witness reports (409), never rolled back."""
    fifo = tmp_path / "saved.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    log = TestLog(LOG_KEY)
    env = {TEST_AFTER_SAVE_FIFO: str(fifo)}
    known = 0  # what the client last heard from the witness
    try:
        for round_ in range(32):
            witness.start(env)
            current = latest(witness)
            expected = None if round_ == 0 else (log.tree.size, log.roots[log.tree.size])
            assert current == expected
            if current is not None:
                # the client did not hear the answer: its old size is stale, 409 tells it
                status, body, _ = witness.post(log.add_body(known))
                assert (status, body) == (409, f"{current[0]}\n".encode())
                known = current[0]
            log.append(1 + round_ % 5)
            answers: list[object] = []

            def send(body: bytes = log.add_body(known), answers: list[object] = answers) -> None:
                try:
                    answers.append(witness.post(body))
                except OSError as exc:
                    answers.append(exc)

            sender = threading.Thread(target=send)
            sender.start()
            assert wait_fifo(fd) == b"saved\n"
            witness.kill()  # SIGKILL after the save, before the answer
            sender.join(60)
            assert len(answers) == 1 and isinstance(answers[0], OSError)
        witness.start()
        assert latest(witness) == (log.tree.size, log.roots[log.tree.size])
    finally:
        os.close(fd)


def test_concurrent_add_checkpoints_never_cosign_two_roots(witness: WitnessProcess) -> None:
    """Two add-checkpoint requests from the same old size at once: one is cosigned,
    the other gets 409 (its old size is stale) and, resent, is refused too."""
    base = TestLog(LOG_KEY)
    witness.start()
    cosigned: dict[int, set[bytes]] = {}
    for round_ in range(16):
        size = base.tree.size
        a, b = base.fork(), base.fork()
        a.append(3, tag=b" a%d" % round_)
        # half the rounds race a fork of the same size, half a shorter other history
        b.append(3 if round_ % 2 else 1, tag=b" b%d" % round_)
        results: dict[str, tuple[int, bytes, str]] = {}

        def send(name: str, log: TestLog, results: dict[str, tuple[int, bytes, str]] = results,
                 size: int = size) -> None:
            results[name] = witness.post(log.add_body(size))

        threads = [threading.Thread(target=send, args=(n, x)) for n, x in (("a", a), ("b", b))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(r[0] for r in results.values()) == [200, 409], results
        winner, loser = (a, b) if results["a"][0] == 200 else (b, a)
        current = latest(witness)
        assert current == (winner.tree.size, winner.roots[winner.tree.size])
        cosigned.setdefault(current[0], set()).add(current[1])
        if loser.tree.size >= winner.tree.size:
            assert witness.post(loser.add_body(winner.tree.size))[0] in (409, 422)
        assert latest(witness) == current
        base = winner
    assert all(len(roots) == 1 for roots in cosigned.values())
