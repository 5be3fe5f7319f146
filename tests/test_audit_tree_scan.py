"""One pass for the chain and the Merkle tree (boxmaker/_audit_tree_scan.py).

The tree is checked against a tree built independently from the leaf
definition (complete lines across the day files) with RFC 6962's recursive
hash, and the chain report against the plain directory verifier.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from boxmaker._audit_files import verify_directory
from boxmaker._audit_tree_scan import verify_with_tree
from boxmaker.proto._convert import unstructure
from tests.fakes.audit_log import valid_log


def _rfc6962_root(leaves: list[bytes]) -> bytes:
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    split = 1
    while split * 2 < len(leaves):
        split *= 2
    return hashlib.sha256(b"\x01" + _rfc6962_root(leaves[:split])
                          + _rfc6962_root(leaves[split:])).digest()


def _complete_lines(directory: Path) -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(directory.glob("*.jsonl")):
        if not path.is_file() or path.name == "notes.jsonl":
            continue
        for line in path.read_bytes().split(b"\n")[:-1]:
            out.append((path.name, line))
    return out


@pytest.mark.parametrize("files", [1, 3])
def test_roots_at_every_size_match_an_independent_tree(tmp_path: Path, files: int) -> None:
    builder = valid_log(7, files=files)
    builder.garbage()
    builder.torn()
    builder.write(tmp_path)
    (tmp_path / "notes.jsonl").write_bytes(b"ignored\n")
    lines = [line for _, line in _complete_lines(tmp_path)]
    sizes = set(range(len(lines) + 2))
    report, facts = verify_with_tree(tmp_path, sizes=sizes)
    assert facts.size == len(lines)
    assert set(facts.roots) == set(range(len(lines) + 1))  # no root past the end
    for size, root in facts.roots.items():
        assert root == _rfc6962_root(lines[:size]), size
    assert unstructure(report) == unstructure(verify_directory(tmp_path))
    assert report.ignored_files == ["notes.jsonl"]


def test_only_the_sizes_asked_for(tmp_path: Path) -> None:
    valid_log(3, files=1).write(tmp_path)
    _, facts = verify_with_tree(tmp_path, sizes={2})
    assert list(facts.roots) == [2]
    _, facts = verify_with_tree(tmp_path, sizes=set())
    assert facts.roots == {}


def test_file_start_and_position(tmp_path: Path) -> None:
    valid_log(6, files=3).write(tmp_path)
    _, facts = verify_with_tree(tmp_path, sizes=set())
    lines = _complete_lines(tmp_path)
    for index, (name, _) in enumerate(lines):
        first = next(i for i, (n, _) in enumerate(lines) if n == name)
        assert facts.file_start[name] == first
        line_in_file = index - first + 1
        assert facts.position(name, line_in_file) == index + 1
    assert facts.position("2099-01-01.jsonl", 1) is None


def test_a_changed_line_changes_the_root_and_breaks_the_chain(tmp_path: Path) -> None:
    builder = valid_log(4, files=1)
    builder.write(tmp_path)
    report, facts = verify_with_tree(tmp_path, sizes={4})
    assert report.ok
    path = next(tmp_path.glob("*.jsonl"))
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"seq":2', b'"seq":9', 1))
    bad_report, bad_facts = verify_with_tree(tmp_path, sizes={4})
    assert not bad_report.ok
    assert bad_facts.roots[4] != facts.roots[4]


def test_empty_log(tmp_path: Path) -> None:
    _, facts = verify_with_tree(tmp_path, sizes={0, 1})
    assert facts.size == 0 and facts.roots == {0: hashlib.sha256(b"").digest()}


def test_progress_counts_the_bytes_read(tmp_path: Path) -> None:
    valid_log(5, files=2).write(tmp_path)
    seen: list[int] = []
    verify_with_tree(tmp_path, sizes=set(), progress=seen.append)
    assert sum(seen) == sum(p.stat().st_size for p in tmp_path.glob("*.jsonl"))
