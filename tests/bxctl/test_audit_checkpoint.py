"""`bxctl audit verify --witness-key` and `bxctl audit key`
(boxmaker/bxctl/_audit_checkpoint.py), on a real audit directory with a real
cosigned checkpoint: a log that matches is ok, a rewritten or cut log is
named, the log's key is found beside the home, what came from files is escaped."""

from __future__ import annotations

import socket
from pathlib import Path

import click
import pytest

from boxmaker._audit_leaves import iter_leaves
from boxmaker._checkpoint_files import cosigned_name, save_checkpoint
from boxmaker.bxctl._audit_checkpoint import (
    PUB_NAME,
    WitnessUnreachable,
    check,
    find_log_key,
    gather,
    parse_witness_key,
    text_lines,
)
from boxmaker.proto.tlog._checkpoint import Checkpoint, sign_checkpoint
from boxmaker.proto.tlog._merkle import CompactRange, leaf_hash
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, TYPE_ED25519, Note, Signer, cosign_text
from tests.fakes.audit_log import valid_log

ORIGIN = "boxmaker/verify-test/0"
LOG = Signer.from_seed(ORIGIN, TYPE_ED25519, b"\x21" * 32)
WITNESS = Signer.from_seed("witness.test/v", TYPE_COSIGNATURE_V1, b"\x22" * 32)


def make_home(tmp_path: Path, *, cosign: bool = True) -> Path:
    home = tmp_path / "home"
    audit = home / "audit"
    valid_log(6, files=2).write(audit)
    (home / PUB_NAME).write_text(LOG.verifier.text() + "\n")
    tree = CompactRange()
    for _, _, line in iter_leaves(audit):
        tree.append(leaf_hash(line))
    signed = sign_checkpoint(Checkpoint(origin=ORIGIN, size=tree.size, root=tree.root()), LOG)
    note = signed.note
    if cosign:
        note = Note(text=note.text, signatures=(*note.signatures,
                                                cosign_text(note.text, WITNESS, 1_700_000_000)))
    save_checkpoint(audit, cosigned_name(WITNESS.verifier), note.encode(), fsync=False)
    return home


def run_check(home: Path) -> tuple[str, list[str]]:
    report, finding, facts = check(home / "audit", home=home, explicit_dir=False,
                                   witness_key=WITNESS.verifier, witness_url=None,
                                   expect_head=None)
    assert report.ok
    return finding.verdict, text_lines(report, finding, facts, None)


def test_a_log_that_matches_its_cosigned_checkpoint_is_ok(tmp_path: Path) -> None:
    verdict, lines = run_check(make_home(tmp_path))
    assert verdict == "ok"
    assert lines[-1].startswith("checkpoint ok at size ")
    assert lines[-1].endswith("(local checkpoints only)")


def test_a_checkpoint_the_witness_did_not_cosign_is_no_checkpoint(tmp_path: Path) -> None:
    verdict, lines = run_check(make_home(tmp_path, cosign=False))
    assert verdict == "no_checkpoint"
    assert lines[-1].startswith("checkpoint FAILED: no_checkpoint")


def test_a_cut_log_is_truncated(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    last = sorted((home / "audit").glob("*.jsonl"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])  # drop the last line
    verdict, _ = run_check(home)
    assert verdict == "truncated"


def test_no_key_means_no_verdict_but_a_reason(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    (home / PUB_NAME).unlink()
    _, finding, _ = check(home / "audit", home=home, explicit_dir=False,
                               witness_key=WITNESS.verifier, witness_url=None,
                               expect_head=None)
    assert finding.verdict == "no_checkpoint" and "the log's key is unknown" in finding.detail


def test_find_log_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert find_log_key(home, None) == (None, f"no {PUB_NAME} in {home}")
    elsewhere = tmp_path / "copy" / "audit"
    elsewhere.mkdir(parents=True)
    (elsewhere.parent / PUB_NAME).write_text(LOG.verifier.text())
    key, where = find_log_key(home, elsewhere)
    assert key == LOG.verifier and where == str(elsewhere.parent / PUB_NAME)
    (home / PUB_NAME).write_text(WITNESS.verifier.text())
    key, why = find_log_key(home, elsewhere)
    assert key is None and "not a log's (0x01) key" in why
    (home / PUB_NAME).write_text("garbage")
    assert "not a verifier key" in find_log_key(home, None)[1]


def test_parse_witness_key() -> None:
    assert parse_witness_key(WITNESS.verifier.text()) == WITNESS.verifier
    with pytest.raises(click.BadParameter, match="cosignature/v1"):
        parse_witness_key(LOG.verifier.text())
    with pytest.raises(click.BadParameter):
        parse_witness_key("nope")


def test_gather_skips_what_does_not_parse_and_a_bad_url_is_a_bad_parameter(
        tmp_path: Path) -> None:
    home = make_home(tmp_path)
    save_checkpoint(home / "audit", "junk.checkpoint", b"not a note", fsync=False)
    found = gather(home / "audit", ORIGIN, None)
    assert [c.source for c in found] == [
        f"audit/checkpoints/{cosigned_name(WITNESS.verifier)}"]
    with pytest.raises(click.BadParameter):
        gather(home / "audit", ORIGIN, "ftp://w")


def test_an_unreachable_witness_checks_nothing(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(WitnessUnreachable, match="nothing was checked") as caught:
        gather(home / "audit", ORIGIN, f"http://127.0.0.1:{port}")
    assert caught.value.exit_code == 3
