"""The tlog-witness add-checkpoint body (boxmaker/proto/tlog/_witness_wire.py)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto.tlog._checkpoint import Checkpoint, sign_checkpoint
from boxmaker.proto.tlog._note import TYPE_ED25519, Signer
from boxmaker.proto.tlog._witness_wire import (
    MAX_PROOF_LINES,
    Malformed,
    encode_add_checkpoint,
    parse_add_checkpoint,
)

LOG = Signer.from_seed("box.example/log", TYPE_ED25519, b"\x05" * 32)
SIGNED = sign_checkpoint(Checkpoint(origin="box.example/log", size=9,
                                    root=hashlib.sha256(b"root").digest()), LOG).encode()
hashes = st.binary(min_size=32, max_size=32)


@given(old=st.integers(0, 2**63 - 1), proof=st.lists(hashes, max_size=MAX_PROOF_LINES))
def test_bodies_round_trip(old: int, proof: list[bytes]) -> None:
    parsed = parse_add_checkpoint(encode_add_checkpoint(old, proof, SIGNED))
    assert parsed.old == old and list(parsed.proof) == proof
    assert parsed.signed.encode() == SIGNED
    assert parsed.signed.checkpoint.size == 9


def test_the_c2sp_layout() -> None:
    proof = [b"\x00" * 32, b"\xff" * 32]
    body = encode_add_checkpoint(3, proof, SIGNED)
    assert body.startswith(b"old 3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
                           b"//////////////////////////////////////////8=\n\n")
    assert body.endswith(SIGNED)


def test_at_most_63_proof_lines() -> None:
    body = encode_add_checkpoint(1, [b"\x01" * 32] * (MAX_PROOF_LINES + 1), SIGNED)
    with pytest.raises(Malformed, match="more than 63"):
        parse_add_checkpoint(body)


@pytest.mark.parametrize(("body", "why"), [
    (b"", "starts with"),
    (b"new 3\n\n" + SIGNED, "starts with"),
    (b"old 03\n\n" + SIGNED, "tree size"),
    (b"old \xff\n\n" + SIGNED, "tree size"),
    (b"old 3\nAAAA\n\n" + SIGNED, "32-byte"),
    (b"old 3\n!!!!\n\n" + SIGNED, "base64"),
    (b"old 3\n\xff\n\n" + SIGNED, "base64"),
    (b"old 3\n" + SIGNED, "base64"),  # the checkpoint read as proof lines
    (b"old 3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "no empty line"),
    (b"old 3\n\nnot a note\n", "not a signed checkpoint"),
])
def test_malformed_bodies(body: bytes, why: str) -> None:
    with pytest.raises(Malformed, match=why):
        parse_add_checkpoint(body)
