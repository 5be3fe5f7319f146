"""Signed notes, verifier keys, cosignatures and checkpoints against published vectors.

Sources (copied here as data):
- golang.org/x/mod/sumdb/note note_test.go: the PeterNeumann and EnochRoot keys
  and signatures (TestNewSigner, TestSign, TestOpen).
- C2SP signed-note.md "Verifier keys / Example": example.com/foo.
- golang.org/x/mod/sumdb/tlog note_test.go TestFormatTree: the checkpoint body.
"""

from __future__ import annotations

import base64

import pytest

from boxmaker.proto.tlog._checkpoint import (
    Checkpoint,
    CheckpointError,
    cosigned_at,
    log_signature_ok,
    parse_checkpoint_body,
    parse_signed_checkpoint,
    sign_checkpoint,
)
from boxmaker.proto.tlog._merkle import leaf_hash
from boxmaker.proto.tlog._note import (
    TYPE_COSIGNATURE_V1,
    TYPE_ED25519,
    BadSignature,
    Note,
    NoteError,
    Signer,
    cosign_text,
    parse_note,
    parse_verifier_key,
    sign_text,
    verified_by,
)

PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (b"If you think cryptography is the answer to your problem,\n"
        b"then you don't know what your problem is.\n")
PETER_SIG = ("\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2p"
             "ZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")
ENOCH_SIG = ("\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5o"
             "vTG01oOTGwnWLox33WWd1RvMc+QQ=\n")
FOO_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
FOO_NOTE = ("This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1T"
            "nagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n")


def peter_signer() -> Signer:
    raw = base64.b64decode(PETER_SKEY.split("+", 4)[4])
    assert raw[0] == TYPE_ED25519
    return Signer.from_seed("PeterNeumann", TYPE_ED25519, raw[1:])


def test_verifier_key_vectors() -> None:
    for text in (PETER_VKEY, ENOCH_VKEY, FOO_VKEY):
        key = parse_verifier_key(text)
        assert key.text() == text
    assert peter_signer().verifier.text() == PETER_VKEY


def test_verifier_key_manglings_refused() -> None:
    b = bytearray(PETER_VKEY.encode())
    for i in range(len(b)):
        b[i] += 1
        with pytest.raises((NoteError, UnicodeDecodeError)):
            parse_verifier_key(b.decode("latin-1"))
        b[i] -= 1
    for cut in range(1, len(PETER_VKEY)):
        with pytest.raises(NoteError):
            parse_verifier_key(PETER_VKEY[:cut])
    # golang's "unknown algorithm, with adjusted key hash"
    with pytest.raises(NoteError):
        parse_verifier_key("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")


def test_sign_vector() -> None:
    line = sign_text(TEXT, peter_signer())
    assert Note(text=TEXT, signatures=(line,)).encode() == TEXT + b"\n" + PETER_SIG.encode()


def test_open_vectors() -> None:
    peter, enoch = parse_verifier_key(PETER_VKEY), parse_verifier_key(ENOCH_VKEY)
    note = parse_note(TEXT + b"\n" + (PETER_SIG + ENOCH_SIG).encode())
    assert note.text == TEXT
    assert set(verified_by(note, [peter])) == {peter}
    assert set(verified_by(note, [peter, enoch])) == {peter, enoch}
    assert verified_by(note, []) == {}
    foo = parse_verifier_key(FOO_VKEY)
    assert set(verified_by(parse_note(FOO_NOTE.encode()), [foo])) == {foo}
    # golang: an invalid signature of a known key rejects the note
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(BadSignature):
        verified_by(parse_note(TEXT + b"\n" + bad.encode()), [peter])


@pytest.mark.parametrize("message", [
    TEXT,
    TEXT + b"\n",
    TEXT + b"\n" + PETER_SIG.encode()[:-1],
    b"\x01" + TEXT + b"\n" + PETER_SIG.encode(),
    b"\xff" + TEXT + b"\n" + PETER_SIG.encode(),
    TEXT + b"\n" + "\u2014 Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2p"
    "ZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=".encode(),
    TEXT + b"\n" + PETER_SIG.encode() + b"Unexpected line.\n",
    TEXT + b"\n" + PETER_SIG.encode() * 101,
])
def test_malformed_notes_refused(message: bytes) -> None:
    with pytest.raises(NoteError):
        parse_note(message)


def test_checkpoint_body_vector() -> None:
    # golang.org/x/mod/sumdb/tlog TestFormatTree
    golden = b"go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
    cp = Checkpoint(origin="go.sum", size=123456789012, root=leaf_hash(b"hello world"))
    assert cp.body() == golden.replace(b"go.sum database tree", b"go.sum")
    with pytest.raises(CheckpointError):  # an origin with spaces is refused here
        parse_checkpoint_body(golden)
    parsed = parse_checkpoint_body(golden.replace(b"go.sum database tree", b"go.sum/db"))
    assert (parsed.size, parsed.root) == (123456789012, leaf_hash(b"hello world"))
    for bad in (b"o\n0xab\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
                b"o\n012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
                b"o\n12\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n",
                b"o\n12\n",
                b"o\n12\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n\n"):
        with pytest.raises(CheckpointError):
            parse_checkpoint_body(bad)


def test_checkpoint_signed_and_cosigned() -> None:
    log = Signer.from_seed("boxmaker/h/0", TYPE_ED25519, bytes(range(32)))
    witness = Signer.from_seed("w.example/w1", TYPE_COSIGNATURE_V1, bytes(range(1, 33)))
    signed = sign_checkpoint(Checkpoint(origin="boxmaker/h/0", size=3, root=bytes(32)), log)
    cosig = cosign_text(signed.note.text, witness, 1679315147)
    assert len(base64.b64decode(cosig.text().split(" ")[2])) == 4 + 8 + 64
    data = signed.encode() + cosig.text().encode()
    again = parse_signed_checkpoint(data)
    assert log_signature_ok(again, log.verifier)
    assert cosigned_at(again, witness.verifier) == 1679315147
    # the witness key id uses type 0x04 (C2SP tlog-cosignature)
    assert witness.verifier.text().split("+")[2].startswith(
        base64.b64encode(b"\x04" + witness.verifier.public).decode()[:4])
    # a cosignature is not a log signature: keys of the other type do not match
    assert cosigned_at(again, log.verifier) is None
    tampered = data.replace(b"\n3\n", b"\n4\n")
    with pytest.raises(BadSignature):
        cosigned_at(parse_signed_checkpoint(tampered), witness.verifier)
