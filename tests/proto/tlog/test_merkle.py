"""RFC 6962 trees: published vectors, and every proof against a naive implementation."""

from __future__ import annotations

import functools
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto.tlog._merkle import (
    EMPTY_ROOT,
    CompactRange,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_reader,
    verify_consistency,
    verify_inclusion,
)

# Vectors copied from github.com/transparency-dev/merkle: testonly/constants.go
# (LeafInputs, RootHashes) and cmd/proofgen/main.go (inclusionProofs with a
# 1-based leaf index, consistencyProofs).
LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f")]
ROOTS = [bytes.fromhex(h) for h in (
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")]
INCLUSION = [  # (1-based leaf index, tree size, proof)
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]


# -- the naive implementation: RFC 6962 section 2.1 read literally, over lists


def naive_mth(hashes: list[bytes]) -> bytes:
    return _naive_mth(tuple(hashes))


@functools.lru_cache(maxsize=1 << 16)  # the same subtrees, asked for again and again
def _naive_mth(hashes: tuple[bytes, ...]) -> bytes:
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return node_hash(_naive_mth(hashes[:k]), _naive_mth(hashes[k:]))


def naive_path(m: int, hashes: list[bytes]) -> list[bytes]:
    n = len(hashes)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*naive_path(m, hashes[:k]), naive_mth(hashes[k:])]
    return [*naive_path(m - k, hashes[k:]), naive_mth(hashes[:k])]


def naive_subproof(m: int, hashes: list[bytes], complete: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if complete else [naive_mth(hashes)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return [*naive_subproof(m, hashes[:k], complete), naive_mth(hashes[k:])]
    return [*naive_subproof(m - k, hashes[k:], False), naive_mth(hashes[:k])]


def naive_proof(m: int, hashes: list[bytes]) -> list[bytes]:
    return [] if m == 0 else naive_subproof(m, hashes, True)


class Stored:
    """Every complete subtree, as the compact range reports them: the reader."""

    def __init__(self, hashes: list[bytes]) -> None:
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.tree = CompactRange()
        for h in hashes:
            for level, index, node in self.tree.append(h):
                self.nodes[level, index] = node

    def read(self, level: int, index: int) -> bytes:
        return self.nodes[level, index]


def leaves(n: int) -> list[bytes]:
    return [leaf_hash(b"line %d" % i) for i in range(n)]


def test_leaf_and_root_vectors() -> None:
    assert ROOTS[0] == EMPTY_ROOT
    tree = CompactRange()
    assert tree.root() == ROOTS[0]
    for i, data in enumerate(LEAVES):
        tree.append(leaf_hash(data))
        assert tree.root() == ROOTS[i + 1]
    # golang.org/x/mod/sumdb/tlog note_test.go: RecordHash("hello world")
    assert leaf_hash(b"hello world") == __import__("base64").b64decode(
        "TszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=")


def test_inclusion_vectors() -> None:
    stored = Stored([leaf_hash(d) for d in LEAVES])
    for index1, size, proof_hex in INCLUSION:
        proof = [bytes.fromhex(h) for h in proof_hex]
        assert inclusion_proof(index1 - 1, size, stored.read) == proof
        assert verify_inclusion(index1 - 1, size, leaf_hash(LEAVES[index1 - 1]), proof,
                                ROOTS[size])


def test_consistency_vectors() -> None:
    stored = Stored([leaf_hash(d) for d in LEAVES])
    for old, new, proof_hex in CONSISTENCY:
        proof = [bytes.fromhex(h) for h in proof_hex]
        assert consistency_proof(old, new, stored.read) == proof
        assert verify_consistency(old, new, ROOTS[old], ROOTS[new], proof)
        if proof:
            bad = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
            assert not verify_consistency(old, new, ROOTS[old], ROOTS[new], bad)
            assert not verify_consistency(old, new, ROOTS[old], ROOTS[new], proof[:-1])


def test_every_size_up_to_300_against_the_naive_tree() -> None:
    hashes = leaves(300)
    stored = Stored(hashes)
    tree = CompactRange()
    roots = [naive_mth(hashes[:n]) for n in range(301)]
    for n in range(1, 301):
        tree.append(hashes[n - 1])
        assert tree.root() == roots[n]
        assert root_from_reader(n, stored.read) == roots[n]
    for n in range(1, 301):
        prefix = hashes[:n]
        for m in range(0, n + 1):
            proof = consistency_proof(m, n, stored.read)
            assert proof == naive_proof(m, prefix)
            assert verify_consistency(m, n, roots[m], roots[n], proof)
            if 0 < m < n:
                assert not verify_consistency(m, n, roots[m], roots[n - 1], proof)
                assert not verify_consistency(m, n, roots[m - 1], roots[n], proof)
        for index in range(0, n, max(1, n // 17)):
            path = inclusion_proof(index, n, stored.read)
            assert path == naive_path(index, prefix)
            assert verify_inclusion(index, n, hashes[index], path, roots[n])
            assert not verify_inclusion(index, n, hashes[index - 1] if index else hashes[1 % n],
                                        path, roots[n]) or n == 1


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=5000), st.data())
def test_random_larger_trees(n: int, data: st.DataObject) -> None:
    hashes = leaves(n)
    stored = Stored(hashes)
    m = data.draw(st.integers(min_value=0, max_value=n))
    proof = consistency_proof(m, n, stored.read)
    assert proof == naive_proof(m, hashes)
    assert verify_consistency(m, n, naive_mth(hashes[:m]), naive_mth(hashes), proof)
    assert len(proof) <= 2 * n.bit_length()
    index = data.draw(st.integers(min_value=0, max_value=n - 1))
    path = inclusion_proof(index, n, stored.read)
    assert path == naive_path(index, hashes)
    assert verify_inclusion(index, n, hashes[index], path, naive_mth(hashes))


def test_equal_sizes_and_zero() -> None:
    root = naive_mth(leaves(5))
    assert verify_consistency(5, 5, root, root, [])
    assert not verify_consistency(5, 5, root, EMPTY_ROOT, [])
    assert verify_consistency(0, 5, EMPTY_ROOT, root, [])
    assert not verify_consistency(0, 5, EMPTY_ROOT, root, [root])
    assert not verify_consistency(6, 5, root, root, [])
