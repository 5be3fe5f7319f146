"""brokerd's Merkle tree and its stored hashes (boxmaker/brokerd/log/_tiles.py), on a
real audit directory: the level files hold exactly the complete subtrees, a
proof from them verifies, damage is found at open and rebuilt from the lines."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.brokerd.log._tiles import TILES, StoreDamaged, TreeStore, build_tiles, scan_tree
from boxmaker.proto.tlog._merkle import verify_consistency


def _leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _levels(lines: list[bytes]) -> list[bytes]:
    """Each level's complete subtree hashes, concatenated, as RFC 6962 defines them."""
    level = [_leaf(line) for line in lines]
    out = []
    while level:
        out.append(b"".join(level))
        level = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
    return out


def _write_log(directory: Path, lines: list[bytes], *, files: int = 2) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    per = max(1, len(lines) // files + 1)
    for index in range(files):
        chunk = lines[index * per:(index + 1) * per]
        (directory / f"2026-11-{index + 1:02d}.jsonl").write_bytes(
            b"".join(line + b"\n" for line in chunk))


def _lines(count: int) -> list[bytes]:
    return [f'{{"seq":{i}}}'.encode() for i in range(count)]


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 8, 33])
def test_build_tiles_writes_every_complete_subtree(tmp_path: Path, count: int) -> None:
    lines = _lines(count)
    _write_log(tmp_path, lines)
    tree = build_tiles(tmp_path, tmp_path / TILES)
    assert tree.size == count
    for level, expected in enumerate(_levels(lines)):
        assert (tmp_path / TILES / f"level-{level:02d}").read_bytes() == expected
    assert tree.root() == scan_tree(tmp_path).root()


def test_build_tiles_for_fewer_lines_and_more_than_there_are(tmp_path: Path) -> None:
    _write_log(tmp_path, _lines(10))
    assert build_tiles(tmp_path, tmp_path / "t", 4).size == 4
    assert (tmp_path / "t" / "level-00").stat().st_size == 4 * 32
    with pytest.raises(StoreDamaged, match="fewer than 11"):
        build_tiles(tmp_path, tmp_path / "t", 11)


@settings(max_examples=25, deadline=None)
@given(first=st.integers(0, 40), more=st.integers(0, 40), data=st.data())
def test_proofs_from_the_store_verify(tmp_path_factory: pytest.TempPathFactory, first: int,
                                      more: int, data: st.DataObject) -> None:
    directory = tmp_path_factory.mktemp("audit")
    lines = _lines(first + more)
    _write_log(directory, lines[:first])
    store = TreeStore.open(directory)
    try:
        old_root = store.root()
        store.append_lines(lines[first:])
        store.flush()
        new = store.size
        assert new == first + more
        old = data.draw(st.integers(0, new))
        old_root_at = _root_of(lines[:old])
        proof = store.proof(old, new, None, store.root())
        assert old == 0 or verify_consistency(old, new, old_root_at, store.root(), proof)
        assert store.root() == _root_of(lines)
        if first:
            assert old_root == _root_of(lines[:first])
        for level, expected in enumerate(_levels(lines)):
            assert (directory / TILES / f"level-{level:02d}").read_bytes() == expected
    finally:
        store.close()


def _root_of(lines: list[bytes]) -> bytes:
    if not lines:
        return hashlib.sha256(b"").digest()
    if len(lines) == 1:
        return _leaf(lines[0])
    split = 1
    while split * 2 < len(lines):
        split *= 2
    return _node(_root_of(lines[:split]), _root_of(lines[split:]))


def test_open_rebuilds_missing_damaged_and_cuts_extra_hashes(tmp_path: Path) -> None:
    lines = _lines(12)
    _write_log(tmp_path, lines)
    TreeStore.open(tmp_path).close()
    level0 = tmp_path / TILES / "level-00"
    expected = level0.read_bytes()
    # damaged: a hash the root is made from (12 = 8 + 4: level 3 node 0, level 2 node 2);
    # damage below those is found when a proof reads it (next test)
    level3 = tmp_path / TILES / "level-03"
    level3.write_bytes(b"\x00" * 32)
    TreeStore.open(tmp_path).close()
    assert level3.read_bytes() == _levels(lines)[3]
    # missing: a level removed
    os.unlink(tmp_path / TILES / "level-01")
    TreeStore.open(tmp_path).close()
    assert (tmp_path / TILES / "level-01").read_bytes() == _levels(lines)[1]
    # extra: nodes past the end (a crash after a write) are cut
    with open(level0, "ab") as f:
        f.write(b"\x07" * 64)
    TreeStore.open(tmp_path).close()
    assert level0.read_bytes() == expected


def test_a_proof_from_damaged_hashes_is_refused(tmp_path: Path) -> None:
    _write_log(tmp_path, _lines(16))
    store = TreeStore.open(tmp_path)
    try:
        level0 = tmp_path / TILES / "level-00"
        data = bytearray(level0.read_bytes())
        data[5 * 32] ^= 1
        fd = os.open(level0, os.O_WRONLY)
        os.pwrite(fd, bytes(data[5 * 32:6 * 32]), 5 * 32)
        os.close(fd)
        with pytest.raises(StoreDamaged):
            store.proof(5, 16, None, store.root())
    finally:
        store.close()


async def test_rebuild_while_running_keeps_new_nodes(tmp_path: Path) -> None:
    lines = _lines(20)
    _write_log(tmp_path, lines[:10])
    store = TreeStore.open(tmp_path)
    try:
        (tmp_path / TILES / "level-00").write_bytes(b"")
        store.close()  # the descriptors of the old files go with the rebuild
        with trio.fail_after(30):
            await store.rebuild()
        assert store.rebuilt_at == 10
        store.append_lines(lines[10:])
        store.flush()
        assert (tmp_path / TILES / "level-00").read_bytes() == _levels(lines)[0]
        assert not (tmp_path / (TILES + ".new")).exists()
        assert not (tmp_path / (TILES + ".old")).exists()
    finally:
        store.close()


def test_read_past_the_end_is_damage(tmp_path: Path) -> None:
    _write_log(tmp_path, _lines(3))
    store = TreeStore.open(tmp_path)
    try:
        assert store.read(0, 2) == _leaf(_lines(3)[2])
        with pytest.raises(StoreDamaged, match="no node 3"):
            store.read(0, 3)
    finally:
        store.close()
