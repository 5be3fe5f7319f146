"""Note private keys on disk (boxmaker/_keyfile.py), checked against the Go
reference key of golang.org/x/mod/sumdb/note and on real files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from boxmaker._keyfile import (
    MAX_KEY_FILE_BYTES,
    KeyFileError,
    create_key_file,
    decode_private_key,
    encode_private_key,
    load_key,
    read_key_file,
)
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, TYPE_ED25519, sign_text

# The example of golang.org/x/mod/sumdb/note's documentation.
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (b"If you think cryptography is the answer to your problem,\n"
           b"then you don't know what your problem is.\n")
GO_SIG = ("x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2p"
          "ZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=")


def test_the_go_reference_key_decodes_and_signs_as_go_does() -> None:
    signer = decode_private_key(GO_SKEY + "\n")
    assert signer.name == "PeterNeumann" and signer.key_type == TYPE_ED25519
    assert signer.verifier.text() == GO_VKEY
    line = sign_text(GO_TEXT, signer)
    assert line.text() == f"\u2014 PeterNeumann {GO_SIG}\n"
    assert encode_private_key(signer) == GO_SKEY + "\n"


@pytest.mark.parametrize("text", [
    GO_SKEY,  # no newline
    GO_SKEY + "\n\n",
    "PUBLIC+KEY+" + GO_SKEY[len("PRIVATE+KEY+"):] + "\n",
    "PRIVATE+KEY+PeterNeumann+c74f20a3\n",
    "PRIVATE+KEY+PeterNeumann+c74f20a4+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz\n",
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKD\n",
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFzAA==\n",
    "PRIVATE+KEY+Peter Neumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz\n",
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDF!\n",
])
def test_mangled_keys_are_refused(text: str) -> None:
    with pytest.raises(KeyFileError):
        decode_private_key(text)


def test_every_truncation_of_the_go_key_is_refused() -> None:
    full = GO_SKEY + "\n"
    for end in range(len(full) - 1):
        with pytest.raises(KeyFileError):
            decode_private_key(full[:end] + "\n")


def test_create_then_read(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.key"
    signer = create_key_file(path, "box.example/log", TYPE_ED25519)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("PRIVATE+KEY+box.example/log+")
    again = read_key_file(path)
    assert again.verifier == signer.verifier
    assert sign_text(b"x\n", again) == sign_text(b"x\n", signer)
    with pytest.raises(FileExistsError):
        create_key_file(path, "box.example/log", TYPE_ED25519)


def test_two_created_keys_differ(tmp_path: Path) -> None:
    one = create_key_file(tmp_path / "a", "n", TYPE_ED25519)
    two = create_key_file(tmp_path / "b", "n", TYPE_ED25519)
    assert one.verifier.public != two.verifier.public


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o700, 0o660])
def test_a_key_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "k"
    path.write_text(GO_SKEY + "\n")
    os.chmod(path, mode)
    if mode & 0o077:
        with pytest.raises(KeyFileError, match="0600"):
            read_key_file(path)
    else:
        assert read_key_file(path).verifier.text() == GO_VKEY


def test_a_symlink_or_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text(GO_SKEY + "\n")
    real.chmod(0o600)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(KeyFileError, match="symbolic link"):
        read_key_file(tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")  # issue 22 item 12: refused, never waited on
    with pytest.raises(KeyFileError, match="a FIFO"):
        read_key_file(tmp_path / "fifo")
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_key_file(tmp_path / "dir")


def test_a_key_owned_by_another_uid_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    path = tmp_path / "k"
    path.write_text(GO_SKEY + "\n")
    path.chmod(0o600)
    os.chown(path, 12345, 12345)
    with pytest.raises(KeyFileError, match="not owned"):
        read_key_file(path)


def test_oversized_and_binary_files_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_text(GO_SKEY + "\n" + "x" * MAX_KEY_FILE_BYTES)
    big.chmod(0o600)
    with pytest.raises(KeyFileError):
        read_key_file(big)
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe" + GO_SKEY.encode())
    binary.chmod(0o600)
    with pytest.raises(KeyFileError, match="not a key file"):
        read_key_file(binary)


def test_load_key_creates_once_then_reads(tmp_path: Path) -> None:
    path = tmp_path / "witness.key"
    with pytest.raises(FileNotFoundError):
        load_key(path, "w", TYPE_COSIGNATURE_V1, create=False)
    first, created = load_key(path, "w", TYPE_COSIGNATURE_V1, create=True)
    assert created
    second, created_again = load_key(path, "w", TYPE_COSIGNATURE_V1, create=True)
    assert not created_again and second.verifier == first.verifier


def test_load_key_refuses_another_name_or_type(tmp_path: Path) -> None:
    path = tmp_path / "k"
    create_key_file(path, "log-a", TYPE_ED25519)
    with pytest.raises(KeyFileError, match="log-b"):
        load_key(path, "log-b", TYPE_ED25519, create=True)
    with pytest.raises(KeyFileError, match="0x04"):
        load_key(path, "log-a", TYPE_COSIGNATURE_V1, create=True)
