"""A witness that lies about the time (issue 22 item 11), against a real
brokerd and a real HTTP witness on loopback: a correctly signed cosignature
whose time is far ahead of brokerd's clock (2**63-1, year 10000, the last
second of 9999, a day ahead) is refused and nothing of it is kept; the log
names the witness; `bxctl status` keeps answering, also after a restart and
also when such a cosignature was planted in `audit/checkpoints/`."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from boxmaker._checkpoint_files import SIGNED, cosigned_name
from boxmaker._keyfile import read_key_file
from boxmaker.proto.tlog._checkpoint import parse_signed_checkpoint
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, Note, Signer, cosign_text
from tests.fakes.brokerd import BXCTL, Home, admin, echo, env_for, start
from tests.fakes.lying_witness import LyingWitness

LIAR = Signer.from_seed("witness.test/liar", TYPE_COSIGNATURE_V1, b"\x21" * 32)
AHEAD = [2**63 - 1, 253402300800, 253402300799]


@pytest.fixture
def liar_home() -> Iterator[tuple[LyingWitness, Home]]:
    witness = LyingWitness(LIAR, 2**63 - 1)
    home = Home(extra=("[checkpoints]\ninterval_ms = 100\nwitnesses = ["
                       f'{{url = "{witness.url}", key = "{LIAR.verifier.text()}"}}]\n'))
    try:
        yield witness, home
    finally:
        witness.close()
        home.cleanup()


def bxctl_status(home: Home) -> dict[str, Any]:
    done = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "status", "--json"],
                          env=env_for(home), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    plain = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "status"],
                           env=env_for(home), capture_output=True, text=True, timeout=60,
                           check=False)
    assert plain.returncode == 0, (plain.returncode, plain.stdout, plain.stderr)
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def one_push(home: Home, witness: LyingWitness, timestamp: int) -> dict[str, Any]:
    """Start brokerd, make a call, wait for the log line naming the witness."""
    witness.timestamp = timestamp
    proc = start(home, pipe_stderr=True)
    try:
        assert echo(home.broker, "hi")[0]["result"]["status"] == "ok"
        line = proc.read_until("witness.test/liar")
        status = bxctl_status(home)
        assert admin(home.admin, "status", {})["status"]["checkpoints"] == status["checkpoints"]
        return {"line": line, "status": status}
    finally:
        assert proc.stop() == 0


@pytest.mark.parametrize("timestamp", [*AHEAD, "a day ahead"])
def test_a_cosignature_from_the_future_is_refused_and_status_answers(
        liar_home: tuple[LyingWitness, Home], timestamp: int | str) -> None:
    witness, home = liar_home
    when = int(time.time()) + 86400 if timestamp == "a day ahead" else int(timestamp)
    seen = one_push(home, witness, when)
    assert "WARNING" in seen["line"] and "ahead" in seen["line"], seen["line"]
    (shown,) = seen["status"]["checkpoints"]["witnesses"]
    assert shown["size"] is None and shown["cosigned_at"] is None
    assert "ahead" in shown["reason"]
    assert not (home.audit / "checkpoints" / cosigned_name(LIAR.verifier)).exists()
    # After a restart (the refused cosignature was not kept) status still answers.
    proc = start(home)
    try:
        (again,) = bxctl_status(home)["checkpoints"]["witnesses"]
        assert again["cosigned_at"] is None
    finally:
        assert proc.stop() == 0


def test_an_honest_time_is_kept(liar_home: tuple[LyingWitness, Home]) -> None:
    witness, home = liar_home
    seen = one_push(home, witness, int(time.time()) + 60)  # within the bound: clock skew
    assert "cosigned size" in seen["line"], seen["line"]
    (shown,) = seen["status"]["checkpoints"]["witnesses"]
    assert shown["size"] is not None and shown["cosigned_at"] is not None
    assert (home.audit / "checkpoints" / cosigned_name(LIAR.verifier)).exists()


@pytest.mark.parametrize("timestamp", AHEAD)
def test_a_planted_cosignature_from_the_future_never_breaks_status(
        liar_home: tuple[LyingWitness, Home], timestamp: int) -> None:
    """Someone with the owner's uid writes a correctly signed cosigned checkpoint
    with a lying time into audit/checkpoints/ while brokerd is stopped."""
    witness, home = liar_home
    witness.close()  # no witness answers (nothing listens): only the planted file counts
    proc = start(home)
    try:
        assert echo(home.broker, "hi")[0]["result"]["status"] == "ok"
    finally:
        assert proc.stop() == 0
    directory = home.audit / "checkpoints"
    signed = parse_signed_checkpoint((directory / SIGNED).read_bytes())
    assert read_key_file(home.home / "checkpoint.key").verifier.text() in (
        home.home / "checkpoint.pub").read_text()
    lie = cosign_text(signed.note.text, LIAR, timestamp)
    planted = Note(text=signed.note.text, signatures=(*signed.note.signatures, lie))
    (directory / cosigned_name(LIAR.verifier)).write_bytes(planted.encode())
    proc = start(home, pipe_stderr=True)
    try:
        line = proc.read_until("witness.test/liar")
        assert "WARNING" in line and "the kept cosigned checkpoint is not used" in line, line
        assert "ahead of this machine's clock" in line, line
        (shown,) = bxctl_status(home)["checkpoints"]["witnesses"]
        assert shown["size"] is None and shown["cosigned_at"] is None
    finally:
        proc.stop()
