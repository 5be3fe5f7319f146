"""Signed checkpoints off the call path (boxmaker/brokerd/log/_checkpointer.py), with
a real tree store and audit directory and trio's autojump clock: at most one
signature per interval, none when nothing grew, the saved note verifies."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import trio

from boxmaker._checkpoint_files import SIGNED, read_checkpoint
from boxmaker.brokerd.log._checkpointer import Checkpointer
from boxmaker.brokerd.log._tiles import TreeStore
from boxmaker.proto.tlog._checkpoint import log_signature_ok, parse_signed_checkpoint
from boxmaker.proto.tlog._note import TYPE_ED25519, Signer

SIGNER = Signer.from_seed("box.example/log", TYPE_ED25519, b"\x04" * 32)


def _root(lines: list[bytes]) -> bytes:
    if not lines:
        return hashlib.sha256(b"").digest()
    if len(lines) == 1:
        return hashlib.sha256(b"\x00" + lines[0]).digest()
    split = 1
    while split * 2 < len(lines):
        split *= 2
    return hashlib.sha256(b"\x01" + _root(lines[:split]) + _root(lines[split:])).digest()


def make(tmp_path: Path, interval_s: float = 10.0) -> Checkpointer:
    tmp_path.mkdir(exist_ok=True)
    store = TreeStore.open(tmp_path)
    return Checkpointer(store=store, signer=SIGNER, origin="box.example/log",
                        interval_s=interval_s, audit_dir=tmp_path, fsync=False,
                        wall_clock=lambda: 1_700_000_000.0)


def saved(tmp_path: Path) -> tuple[int, bytes]:
    data = read_checkpoint(tmp_path, SIGNED)
    assert data is not None
    signed = parse_signed_checkpoint(data)
    assert log_signature_ok(signed, SIGNER.verifier)
    return signed.checkpoint.size, signed.checkpoint.root


async def test_sign_saves_a_verifying_checkpoint_of_the_lines(tmp_path: Path) -> None:
    checkpointer = make(tmp_path)
    lines = [b"one", b"two", b"three"]
    checkpointer.on_durable(lines)
    await checkpointer.sign()
    assert saved(tmp_path) == (3, _root(lines))
    assert checkpointer.latest is not None and checkpointer.latest.checkpoint.size == 3
    assert checkpointer.signed_at == 1_700_000_000.0 and checkpointer.failure is None


async def test_nothing_new_is_not_signed_again(tmp_path: Path) -> None:
    checkpointer = make(tmp_path)
    checkpointer.on_durable([b"a"])
    await checkpointer.sign()
    first = checkpointer.latest
    changed = checkpointer.changed
    await checkpointer.sign()
    assert checkpointer.latest is first and not changed.is_set()


async def test_at_most_one_signature_per_interval(tmp_path: Path,
                                                  autojump_clock: trio.abc.Clock) -> None:
    checkpointer = make(tmp_path, interval_s=10.0)
    signed_at: list[tuple[float, int]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(checkpointer.run)

        async def watch() -> None:
            while True:
                event = checkpointer.changed
                await event.wait()
                assert checkpointer.latest is not None
                signed_at.append((trio.current_time(), checkpointer.latest.checkpoint.size))

        nursery.start_soon(watch)
        start = trio.current_time()
        for index in range(30):  # a line every second for 30 seconds
            checkpointer.on_durable([f"line {index}".encode()])
            await trio.sleep(1)
        await trio.sleep(25)
        nursery.cancel_scope.cancel()
    times = [t - start for t, _ in signed_at]
    assert times[0] < 1  # the first one at once
    assert all(b - a >= 10 - 1e-6 for a, b in itertools.pairwise(times))
    assert signed_at[-1][1] == 30  # in the end everything is signed
    assert len(signed_at) <= 5
    assert saved(tmp_path)[0] == 30


async def test_a_checkpoint_that_cannot_be_saved_is_reported_and_retried(
        tmp_path: Path) -> None:
    checkpointer = make(tmp_path)
    (tmp_path / "checkpoints").write_bytes(b"not a directory")
    checkpointer.on_durable([b"a"])
    await checkpointer.sign()
    assert checkpointer.failure is not None and "cannot save the checkpoint" in checkpointer.failure
    os.unlink(tmp_path / "checkpoints")
    checkpointer.on_durable([b"b"])
    await checkpointer.sign()
    assert checkpointer.failure is None
    assert saved(tmp_path)[0] == 2


async def test_hashes_that_cannot_be_stored_leave_it_unsigned(tmp_path: Path) -> None:
    checkpointer = make(tmp_path)
    (tmp_path / "tiles").write_bytes(b"a file where the hashes' directory goes")
    checkpointer.on_durable([b"a"])
    await checkpointer.sign()
    assert checkpointer.failure is not None and "tree's hashes" in checkpointer.failure
    assert checkpointer.latest is None
    assert read_checkpoint(tmp_path, SIGNED) is None


async def test_final_signs_what_is_left(tmp_path: Path) -> None:
    checkpointer = make(tmp_path)
    checkpointer.on_durable([b"a", b"b"])
    await checkpointer.final()
    assert saved(tmp_path) == (2, _root([b"a", b"b"]))
