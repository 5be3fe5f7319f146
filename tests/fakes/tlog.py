"""A log for witness tests: lines in a Merkle tree, signed checkpoints, proofs."""

from __future__ import annotations

from boxmaker.proto.tlog._checkpoint import Checkpoint, SignedCheckpoint, sign_checkpoint
from boxmaker.proto.tlog._merkle import CompactRange, consistency_proof, leaf_hash
from boxmaker.proto.tlog._note import TYPE_COSIGNATURE_V1, TYPE_ED25519, Signer
from boxmaker.proto.tlog._witness_wire import encode_add_checkpoint

ORIGIN = "boxmaker/test-host/0"


class TestLog:
    """An append-only list of lines with every complete subtree remembered."""

    __test__ = False

    def __init__(self, signer: Signer, origin: str = ORIGIN, prefix: bytes = b"line") -> None:
        self.signer = signer
        self.origin = origin
        self.prefix = prefix
        self.tree = CompactRange()
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.roots: list[bytes] = [self.tree.root()]

    def append(self, count: int, tag: bytes = b"") -> None:
        for _ in range(count):
            line = b"%s %d%s" % (self.prefix, self.tree.size, tag)
            for level, index, node in self.tree.append(leaf_hash(line)):
                self.nodes[level, index] = node
            self.roots.append(self.tree.root())

    def fork(self) -> TestLog:
        """A copy that can grow differently from here on."""
        other = TestLog(self.signer, self.origin, self.prefix)
        other.tree = self.tree.copy()
        other.nodes = dict(self.nodes)
        other.roots = list(self.roots)
        return other

    def read(self, level: int, index: int) -> bytes:
        return self.nodes[level, index]

    def checkpoint(self, size: int | None = None) -> SignedCheckpoint:
        size = self.tree.size if size is None else size
        return sign_checkpoint(Checkpoint(origin=self.origin, size=size, root=self.roots[size]),
                               self.signer)

    def add_body(self, old: int, size: int | None = None) -> bytes:
        size = self.tree.size if size is None else size
        return encode_add_checkpoint(old, consistency_proof(old, size, self.read),
                                     self.checkpoint(size).encode())


def log_signer(seed: int = 7, origin: str = ORIGIN) -> Signer:
    return Signer.from_seed(origin, TYPE_ED25519, bytes([seed]) * 32)


def witness_signer(seed: int = 9, name: str = "witness.test/w1") -> Signer:
    return Signer.from_seed(name, TYPE_COSIGNATURE_V1, bytes([seed]) * 32)
