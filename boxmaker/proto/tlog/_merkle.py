"""RFC 6962 Merkle trees (10-checkpoints "The tree"): hashing, compact ranges, proofs.

Leaf hash ``SHA-256(0x00 || line)``, interior node ``SHA-256(0x01 || left ||
right)``, the empty tree's root ``SHA-256("")``.  A `CompactRange` keeps the
right edge of a growing tree (one hash per set bit of its size), so appending
and the root are ``O(log n)``.  Proofs (RFC 6962 2.1.1 ``PATH`` and 2.1.2
``PROOF``) are built from a `NodeReader`, which gives the hash of any complete
subtree (``level``, ``index``: the leaves ``[index * 2**level, (index + 1) *
2**level)``); verification follows RFC 9162 2.1.3.2 and 2.1.4.2.  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from ..._errors import PeerError

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
MAX_TREE_SIZE = 2**63 - 1
"""The largest tree size handled (a checkpoint's size is a u63 in practice)."""

NodeReader = Callable[[int, int], bytes]
"""(level, index) -> the hash of that complete subtree."""

CompletedNode = tuple[int, int, bytes]
"""(level, index, hash) of a subtree that an append completed."""


class ProofError(PeerError, ValueError):
    """Sizes for which no proof exists (an index past the end, old > new)."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _largest_power_below(n: int) -> int:
    """The largest power of two strictly less than `n` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


class CompactRange:
    """The right edge of a tree: the roots of its perfect subtrees, left to right."""

    __slots__ = ("_nodes", "_size")

    def __init__(self, size: int = 0, nodes: Sequence[bytes] = ()) -> None:
        if not 0 <= size <= MAX_TREE_SIZE or len(nodes) != size.bit_count():
            raise ValueError("a compact range has one node per set bit of its size")
        self._size = size
        self._nodes = list(nodes)

    @property
    def size(self) -> int:
        return self._size

    @property
    def nodes(self) -> tuple[bytes, ...]:
        return tuple(self._nodes)

    def copy(self) -> CompactRange:
        return CompactRange(self._size, self._nodes)

    def append(self, hash_: bytes) -> list[CompletedNode]:
        """Append one leaf hash; return every subtree it completed (the leaf first)."""
        if self._size >= MAX_TREE_SIZE:
            raise ValueError("the tree is full")
        index = self._size
        level = 0
        completed = [(0, index, hash_)]
        while index & 1:
            hash_ = node_hash(self._nodes.pop(), hash_)
            level += 1
            index >>= 1
            completed.append((level, index, hash_))
        self._nodes.append(hash_)
        self._size += 1
        return completed

    def root(self) -> bytes:
        if not self._nodes:
            return EMPTY_ROOT
        result = self._nodes[-1]
        for node in reversed(self._nodes[:-1]):
            result = node_hash(node, result)
        return result


def decomposition(size: int) -> list[tuple[int, int]]:
    """The (level, index) of the perfect subtrees a tree of `size` leaves is made of."""
    out: list[tuple[int, int]] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            out.append((level, start >> level))
            start += 1 << level
    return out


def root_from_reader(size: int, read: NodeReader) -> bytes:
    """The root of the first `size` leaves from stored complete subtrees."""
    nodes = [read(level, index) for level, index in decomposition(size)]
    return CompactRange(size, nodes).root()


def subtree_hash(start: int, end: int, read: NodeReader) -> bytes:
    """MTH(D[start:end]) where `start` is a multiple of the largest power of two
    below ``end - start`` (as every subtree of a proof is)."""
    count = end - start
    if count <= 0:
        raise ProofError("an empty subtree has no hash here")
    if count & (count - 1) == 0:
        level = count.bit_length() - 1
        return read(level, start >> level)
    k = _largest_power_below(count)
    return node_hash(subtree_hash(start, start + k, read), subtree_hash(start + k, end, read))


def inclusion_proof(index: int, size: int, read: NodeReader) -> list[bytes]:
    """RFC 6962 ``PATH(index, D[size])``."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    proof: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _largest_power_below(end - start)
        if index - start < k:
            proof.append(subtree_hash(start + k, end, read))
            end = start + k
        else:
            proof.append(subtree_hash(start, start + k, read))
            start += k
    proof.reverse()
    return proof


def consistency_proof(old: int, new: int, read: NodeReader) -> list[bytes]:
    """RFC 6962 ``PROOF(old, D[new])``; empty when old is 0 or equals new."""
    if not 0 <= old <= new:
        raise ProofError(f"no consistency proof from {old} to {new}")
    if old in (0, new):
        return []
    proof: list[bytes] = []
    start, end, complete = 0, new, True
    m = old
    while m != end - start:
        k = _largest_power_below(end - start)
        if m <= k:
            proof.append(subtree_hash(start + k, end, read))
            end = start + k
        else:
            proof.append(subtree_hash(start, start + k, read))
            start += k
            m -= k
            complete = False
    if not complete:
        proof.append(subtree_hash(start, end, read))
    proof.reverse()
    return proof


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes],
                     root: bytes) -> bool:
    """RFC 9162 2.1.3.2."""
    if not 0 <= index < size:
        return False
    fn, sn, result = index, size - 1, leaf
    for node in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            result = node_hash(node, result)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, node)
        fn >>= 1
        sn >>= 1
    return sn == 0 and result == root


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 2.1.4.2, plus the edges: from 0 (any tree, empty proof) and
    equal sizes (equal roots, empty proof)."""
    if not 0 <= old <= new:
        return False
    if old == 0:
        return not proof
    if old == new:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for node in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(node, fr)
            sr = node_hash(node, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, node)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0
