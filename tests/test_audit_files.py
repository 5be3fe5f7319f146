"""The audit directory walker: name order, what is read, what is only listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker import _audit_files
from boxmaker._audit_files import iter_lines, list_log_files, log_size, verify_directory
from boxmaker.proto._convert import unstructure
from tests.fakes.audit_log import valid_log, verify_data


def test_walker_reports_what_the_verifier_reports_on_the_same_bytes(tmp_path: Path) -> None:
    builder = valid_log(6, files=3)
    builder.torn()
    builder.write(tmp_path)
    (tmp_path / ".lock").write_bytes(b"")
    (tmp_path / "notes.jsonl").write_bytes(b"not read\n")
    report = verify_directory(tmp_path)
    data = builder.data()
    data["notes.jsonl"] = b"not read\n"
    assert unstructure(report) == unstructure(verify_data(data))
    assert report.ok
    assert report.ignored_files == ["notes.jsonl"]
    assert report.torn_tail is not None


@pytest.mark.parametrize("block", [1, 7, 64, 4096])
def test_lines_split_across_blocks(tmp_path: Path, block: int,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_audit_files, "BLOCK", block)
    path = tmp_path / "f"
    path.write_bytes(b"one\n\ntwo\nthree")
    seen: list[int] = []
    assert list(iter_lines(path, seen.append)) == [
        (b"one", True), (b"", True), (b"two", True), (b"three", False)]
    assert sum(seen) == path.stat().st_size
    path.write_bytes(b"")
    assert list(iter_lines(path)) == []
    path.write_bytes(b"\n")
    assert list(iter_lines(path)) == [(b"", True)]


def test_what_is_read_and_what_is_listed(tmp_path: Path) -> None:
    builder = valid_log(2, files=1)
    builder.write(tmp_path)
    (tmp_path / "2026-12-01.jsonl").mkdir()  # a day name that is not a regular file
    (tmp_path / "2026-12-02.jsonl").symlink_to(tmp_path / "2026-11-01.jsonl")
    (tmp_path / "2026-12-03.jsonl.tmp").write_bytes(b"x")
    (tmp_path / "README").write_bytes(b"x")
    files = list_log_files(tmp_path)
    assert [(f.name, f.day_file) for f in files] == [
        ("2026-11-01.jsonl", True), ("2026-12-01.jsonl", False), ("2026-12-02.jsonl", False)]
    report = verify_directory(tmp_path)
    assert report.ok
    assert report.ignored_files == ["2026-12-01.jsonl", "2026-12-02.jsonl"]
    assert log_size(tmp_path) == (tmp_path / "2026-11-01.jsonl").stat().st_size


def test_empty_directory_and_empty_files(tmp_path: Path) -> None:
    assert verify_directory(tmp_path).ok
    (tmp_path / "2026-11-01.jsonl").write_bytes(b"")
    (tmp_path / "2026-11-02.jsonl").write_bytes(b"")
    report = verify_directory(tmp_path)
    assert report.ok and report.files == 2 and report.records == 0


def test_missing_directory_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify_directory(tmp_path / "nothing")


def test_progress_counts_every_byte(tmp_path: Path) -> None:
    builder = valid_log(5, files=2)
    builder.write(tmp_path)
    seen: list[int] = []
    verify_directory(tmp_path, progress=seen.append)
    assert sum(seen) == log_size(tmp_path)


def test_expect_head_and_on_record_pass_through(tmp_path: Path) -> None:
    builder = valid_log(3, files=1)
    builder.write(tmp_path)
    seqs: list[int] = []
    assert verify_directory(tmp_path, expect_head=builder.head(),
                            on_record=lambda r: seqs.append(r.seq)).ok
    assert seqs == list(range(builder.seq + 1))
    assert not verify_directory(tmp_path, expect_head=(builder.seq + 1, "0" * 64)).ok
