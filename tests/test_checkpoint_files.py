"""audit/checkpoints/ on disk (boxmaker/_checkpoint_files.py)."""

from __future__ import annotations

import stat
from pathlib import Path

from boxmaker._checkpoint_files import (
    MAX_FILES,
    SIGNED,
    checkpoints_dir,
    cosigned_name,
    read_all,
    read_checkpoint,
    save_checkpoint,
)
from boxmaker.proto.tlog._note import MAX_NOTE_BYTES, TYPE_COSIGNATURE_V1, Signer


def _witness(seed: int) -> Signer:
    return Signer.from_seed(f"witness-{seed}", TYPE_COSIGNATURE_V1, bytes([seed]) * 32)


def test_save_creates_a_private_directory_and_replaces(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, SIGNED, b"note one\n", fsync=True)
    directory = checkpoints_dir(tmp_path)
    assert directory == tmp_path / "checkpoints"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700 & ~_umask_bits()
    assert read_checkpoint(tmp_path, SIGNED) == b"note one\n"
    save_checkpoint(tmp_path, SIGNED, b"note two\n", fsync=False)
    assert read_checkpoint(tmp_path, SIGNED) == b"note two\n"


def test_missing_things_read_as_nothing(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path, SIGNED) is None
    assert read_all(tmp_path) == []
    save_checkpoint(tmp_path, SIGNED, b"n\n", fsync=False)
    assert read_checkpoint(tmp_path, "cosigned-0000.checkpoint") is None


def test_cosigned_names_are_per_witness_and_stable() -> None:
    one, two = _witness(1).verifier, _witness(2).verifier
    assert cosigned_name(one) == cosigned_name(_witness(1).verifier)
    assert cosigned_name(one) != cosigned_name(two)
    name = cosigned_name(one)
    assert name.startswith("cosigned-") and name.endswith(".checkpoint")
    assert len(name) == len("cosigned-") + 16 + len(".checkpoint")


def test_read_all_in_name_order_only_checkpoints(tmp_path: Path) -> None:
    names = [cosigned_name(_witness(i).verifier) for i in (3, 1, 2)] + [SIGNED]
    for index, name in enumerate(names):
        save_checkpoint(tmp_path, name, f"note {index}\n".encode(), fsync=False)
    (checkpoints_dir(tmp_path) / "README").write_bytes(b"not a checkpoint")
    (checkpoints_dir(tmp_path) / ".signed.checkpoint.tmp-1").write_bytes(b"tmp")
    found = read_all(tmp_path)
    assert [name for name, _ in found] == sorted(names)
    assert dict(found)[SIGNED] == b"note 3\n"


def test_read_all_is_bounded_in_count(tmp_path: Path) -> None:
    for index in range(MAX_FILES + 5):
        save_checkpoint(tmp_path, f"c{index:03d}.checkpoint", b"n\n", fsync=False)
    found = read_all(tmp_path)
    assert len(found) == MAX_FILES
    assert found[0][0] == "c000.checkpoint" and found[-1][0] == f"c{MAX_FILES - 1:03d}.checkpoint"


def test_a_file_too_big_for_a_note_reads_empty(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, SIGNED, b"a" * MAX_NOTE_BYTES, fsync=False)
    assert read_checkpoint(tmp_path, SIGNED) == b"a" * MAX_NOTE_BYTES
    save_checkpoint(tmp_path, SIGNED, b"a" * (MAX_NOTE_BYTES + 1), fsync=False)
    assert read_checkpoint(tmp_path, SIGNED) == b""
    assert read_all(tmp_path) == [(SIGNED, b"")]


def test_a_symlinked_checkpoint_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"owner's secret")
    checkpoints_dir(tmp_path).mkdir()
    (checkpoints_dir(tmp_path) / SIGNED).symlink_to(secret)
    try:
        value = read_checkpoint(tmp_path, SIGNED)
    except OSError:
        value = None
    assert value != b"owner's secret"


def _umask_bits() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
