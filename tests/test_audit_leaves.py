"""The audit log's lines as Merkle leaves (boxmaker/_audit_leaves.py)."""

from __future__ import annotations

from pathlib import Path

from boxmaker._audit_leaves import iter_leaves
from tests.fakes.audit_log import valid_log


def test_every_complete_line_of_the_day_files_in_order(tmp_path: Path) -> None:
    builder = valid_log(4, files=2)
    builder.garbage(b"not json")
    builder.torn(b'{"torn')
    builder.write(tmp_path)
    (tmp_path / "notes.jsonl").write_bytes(b"not the log's\n")
    (tmp_path / "2026-12-31.jsonl").mkdir()
    expected = []
    for name, data in sorted(builder.data().items()):
        lines = data.split(b"\n")
        for number, line in enumerate(lines[:-1], start=1):
            expected.append((name, number, line))
    leaves = list(iter_leaves(tmp_path))
    assert leaves == expected
    assert any(line == b"not json" for _, _, line in leaves)
    assert all(not line.startswith(b'{"torn') for _, _, line in leaves)
    assert len({name for name, _, _ in leaves}) == 2


def test_empty_directory_has_no_leaves(tmp_path: Path) -> None:
    assert list(iter_leaves(tmp_path)) == []
    (tmp_path / "2026-01-01.jsonl").write_bytes(b"")
    assert list(iter_leaves(tmp_path)) == []
    (tmp_path / "2026-01-01.jsonl").write_bytes(b"\n\n")
    assert list(iter_leaves(tmp_path)) == [("2026-01-01.jsonl", 1, b""),
                                           ("2026-01-01.jsonl", 2, b"")]
