"""C2SP tlog-checkpoint bodies and signed checkpoints (boxmaker/proto/tlog/_checkpoint.py)."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto.tlog._checkpoint import (
    MAX_EXTENSIONS,
    MAX_ORIGIN_BYTES,
    Checkpoint,
    CheckpointError,
    check_origin,
    cosigned_at,
    empty_root_ok,
    log_signature_ok,
    parse_checkpoint_body,
    parse_signed_checkpoint,
    parse_size,
    sign_checkpoint,
)
from boxmaker.proto.tlog._merkle import EMPTY_ROOT, MAX_TREE_SIZE
from boxmaker.proto.tlog._note import (
    TYPE_COSIGNATURE_V1,
    TYPE_ED25519,
    BadSignature,
    Note,
    Signer,
    cosign_text,
)

# The example of c2sp.org/tlog-checkpoint.
SPEC_BODY = (b"example.com/behind-the-sofa\n20852163\n"
             b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")
LOG = Signer.from_seed("box.example/log", TYPE_ED25519, b"\x01" * 32)
WITNESS = Signer.from_seed("witness.example", TYPE_COSIGNATURE_V1, b"\x02" * 32)


def test_the_spec_example_parses_and_writes_back() -> None:
    checkpoint = parse_checkpoint_body(SPEC_BODY)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert checkpoint.body() == SPEC_BODY


def test_extension_lines_are_kept() -> None:
    body = SPEC_BODY + b"ext one\next two\n"
    assert parse_checkpoint_body(body).extensions == ("ext one", "ext two")
    assert parse_checkpoint_body(body).body() == body
    too_many = SPEC_BODY + b"e\n" * (MAX_EXTENSIONS + 1)
    with pytest.raises(CheckpointError):
        parse_checkpoint_body(too_many)
    parse_checkpoint_body(SPEC_BODY + b"e\n" * MAX_EXTENSIONS)


@pytest.mark.parametrize("body", [
    SPEC_BODY[:-1],  # no final newline
    b"example.com/x\n1\n",  # no root
    b"example.com/x\n01\n" + SPEC_BODY.split(b"\n")[2] + b"\n",
    b"example.com/x\n-1\n" + SPEC_BODY.split(b"\n")[2] + b"\n",
    b"example.com/x\n1\nAAAA\n",  # root not 32 bytes
    b"example.com/x\n1\n!!!!\n",
    b"example com\n1\n" + SPEC_BODY.split(b"\n")[2] + b"\n",
    b"\n1\n" + SPEC_BODY.split(b"\n")[2] + b"\n",
    SPEC_BODY + b"\n",  # an empty extension line
    b"\xff\n1\n" + SPEC_BODY.split(b"\n")[2] + b"\n",
])
def test_bodies_that_are_not_checkpoints(body: bytes) -> None:
    with pytest.raises(CheckpointError):
        parse_checkpoint_body(body)


@given(size=st.integers(0, MAX_TREE_SIZE))
def test_sizes_round_trip(size: int) -> None:
    assert parse_size(str(size)) == size


@pytest.mark.parametrize("text", ["", "00", "1.0", "+1", " 1", str(MAX_TREE_SIZE + 1), "1" * 30])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(CheckpointError):
        parse_size(text)


def test_origins() -> None:
    assert check_origin("a" * MAX_ORIGIN_BYTES)
    for bad in ("", "a" * (MAX_ORIGIN_BYTES + 1), "a+b", "a b", "a\tb", "\x00", "\u00e9" * 128):
        with pytest.raises(CheckpointError):
            check_origin(bad)


@given(size=st.integers(0, MAX_TREE_SIZE), root=st.binary(min_size=32, max_size=32))
def test_signed_checkpoints_round_trip_and_verify(size: int, root: bytes) -> None:
    checkpoint = Checkpoint(origin="box.example/log", size=size, root=root)
    signed = sign_checkpoint(checkpoint, LOG)
    again = parse_signed_checkpoint(signed.encode())
    assert again.checkpoint == checkpoint
    assert log_signature_ok(again, LOG.verifier)
    assert not log_signature_ok(again, WITNESS.verifier)
    assert cosigned_at(again, WITNESS.verifier) is None


def test_a_cosignature_gives_its_time_and_a_forged_one_raises() -> None:
    checkpoint = Checkpoint(origin="box.example/log", size=3, root=hashlib.sha256(b"r").digest())
    signed = sign_checkpoint(checkpoint, LOG)
    line = cosign_text(signed.note.text, WITNESS, 1_700_000_000)
    cosigned = parse_signed_checkpoint(
        Note(text=signed.note.text, signatures=(*signed.note.signatures, line)).encode())
    assert cosigned_at(cosigned, WITNESS.verifier) == 1_700_000_000
    other_text = Checkpoint(origin="box.example/log", size=4, root=checkpoint.root).body()
    forged = parse_signed_checkpoint(
        Note(text=other_text, signatures=(*signed.note.signatures, line)).encode())
    with pytest.raises(BadSignature):
        cosigned_at(forged, WITNESS.verifier)
    with pytest.raises(BadSignature):
        log_signature_ok(forged, LOG.verifier)


def test_the_empty_tree_must_carry_the_empty_root() -> None:
    assert empty_root_ok(Checkpoint(origin="o", size=0, root=EMPTY_ROOT))
    assert not empty_root_ok(Checkpoint(origin="o", size=0, root=b"\x00" * 32))
    assert empty_root_ok(Checkpoint(origin="o", size=1, root=b"\x00" * 32))


def test_a_signed_note_whose_text_is_not_a_checkpoint() -> None:
    from boxmaker.proto.tlog._note import sign_text

    text = b"just some text\n"
    note = Note(text=text, signatures=(sign_text(text, LOG),))
    with pytest.raises(CheckpointError):
        parse_signed_checkpoint(note.encode())


def test_a_cosignature_time_far_ahead_is_refused() -> None:
    """Issue 22 item 11: at most MAX_COSIGNATURE_AHEAD_S ahead, never after 9999."""
    from boxmaker.proto.tlog._checkpoint import (
        LAST_TIMESTAMP,
        MAX_COSIGNATURE_AHEAD_S,
        cosignature_time_problem,
    )

    now = 1_700_000_000.0
    assert cosignature_time_problem(1, now) is None  # a slow clock is only shown as old
    assert cosignature_time_problem(int(now) + MAX_COSIGNATURE_AHEAD_S, now) is None
    for bad in (int(now) + MAX_COSIGNATURE_AHEAD_S + 1, LAST_TIMESTAMP + 1, 2**63 - 1, None):
        assert cosignature_time_problem(bad, now) is not None
    assert cosignature_time_problem(LAST_TIMESTAMP, float(LAST_TIMESTAMP)) is None
    assert cosignature_time_problem(LAST_TIMESTAMP + 1, float(LAST_TIMESTAMP + 1)) is not None
