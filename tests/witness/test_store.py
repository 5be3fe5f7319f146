"""The witness's state directory (boxmaker/witness/_store.py), on real files:
what was saved loads back, and any damage refuses the start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from boxmaker.proto.tlog._checkpoint import parse_signed_checkpoint
from boxmaker.witness._logic import Cosigned, decide
from boxmaker.witness._store import StateDamaged, load_state, save_state, state_name
from tests.fakes.tlog import ORIGIN, TestLog, log_signer, witness_signer

WITNESS = witness_signer()
LOG_KEY = log_signer()


def cosigned(size: int = 5, signer_seed: int = 9, origin: str = ORIGIN) -> Cosigned:
    log = TestLog(log_signer(origin=origin), origin=origin)
    log.append(size)
    outcome = decide(log.add_body(0), logs={origin: [log_signer(origin=origin).verifier]},
                     state={}, signer=witness_signer(signer_seed), now=1_700_000_000)
    assert outcome.save is not None
    return outcome.save


def test_state_names_are_sha256_of_the_origin() -> None:
    import hashlib

    assert state_name(ORIGIN) == hashlib.sha256(ORIGIN.encode()).hexdigest() + ".checkpoint"
    assert state_name("a") != state_name("b")


def test_saved_state_loads_back(tmp_path: Path) -> None:
    first = cosigned(5)
    other = cosigned(3, origin="boxmaker/other/0")
    save_state(tmp_path, first)
    save_state(tmp_path, other)
    state = load_state(tmp_path, WITNESS.verifier)
    assert set(state) == {ORIGIN, "boxmaker/other/0"}
    assert state[ORIGIN].note == first.note
    assert state[ORIGIN].checkpoint == first.checkpoint
    bigger = cosigned(9)
    save_state(tmp_path, bigger)
    assert load_state(tmp_path, WITNESS.verifier)[ORIGIN].checkpoint.size == 9


def test_an_empty_or_missing_directory_is_no_state(tmp_path: Path) -> None:
    directory = tmp_path / "new"
    assert load_state(directory, WITNESS.verifier) == {}
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700 & ~_umask()
    (directory / "README").write_text("not a state file")
    assert load_state(directory, WITNESS.verifier) == {}


def test_a_damaged_file_refuses_the_start(tmp_path: Path) -> None:
    save_state(tmp_path, cosigned())
    path = tmp_path / state_name(ORIGIN)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(StateDamaged, match=str(path)):
        load_state(tmp_path, WITNESS.verifier)


def test_a_file_under_another_origins_name_refuses_the_start(tmp_path: Path) -> None:
    save_state(tmp_path, cosigned())
    os.rename(tmp_path / state_name(ORIGIN), tmp_path / state_name("boxmaker/else/0"))
    with pytest.raises(StateDamaged, match="not a checkpoint this witness cosigned"):
        load_state(tmp_path, WITNESS.verifier)


def test_a_checkpoint_cosigned_by_another_witness_refuses_the_start(tmp_path: Path) -> None:
    save_state(tmp_path, cosigned(signer_seed=10))
    with pytest.raises(StateDamaged):
        load_state(tmp_path, WITNESS.verifier)


def test_a_forged_cosignature_refuses_the_start(tmp_path: Path) -> None:
    good = cosigned(5)
    text = parse_signed_checkpoint(good.note).note.text
    forged_text = text.replace(b"\n5\n", b"\n6\n")
    save_state(tmp_path, Cosigned(checkpoint=good.checkpoint,
                                  note=good.note.replace(text, forged_text)))
    with pytest.raises(StateDamaged):
        load_state(tmp_path, WITNESS.verifier)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
