"""brokerd's side of the hook against the real hook script and real FIFOs (no podman).

The state line carries this test process's own pid, so the identity walk
goes below /proc/<self>/root: what was walked lets the hook go on, another
directory (or no state) makes it fail with the reason kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.brokerd.runner._hook import HOOK_SCRIPT, HOOK_SHELL
from boxmaker.brokerd.runner._hook_gate import Gate, bundle_rootfs
from boxmaker.brokerd.runner._three_steps import MountIdentity


def identity(path: Path) -> MountIdentity:
    st = os.stat(path)
    return MountIdentity(destination=str(path), dev=st.st_dev, ino=st.st_ino)


async def hooked(tmp_path: Path, mounts: list[MountIdentity],
                 state: bytes) -> tuple[Gate, int]:
    (tmp_path / "fifos").mkdir()
    gate = Gate(tmp_path / "fifos", mounts, lambda _state: "/")
    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gate.serve)
                done = await trio.run_process(
                    [HOOK_SHELL, "-c", HOOK_SCRIPT, "sh", str(gate.state_fifo),
                     str(gate.verdict_fifo)], stdin=state, env={}, check=False)
    finally:
        await gate.aclose()
    return gate, done.returncode


def state_of(pid: int) -> bytes:
    return json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": pid, "bundle": "/b"}).encode()


async def test_what_was_walked_goes_on(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    gate, code = await hooked(tmp_path, [identity(tmp_path / "tree")], state_of(os.getpid()))
    assert (gate.checked, gate.refused, code) == (True, None, 0)


async def test_another_directory_stops_the_hook(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "other").mkdir()
    walked = identity(tmp_path / "other")
    swapped = MountIdentity(destination=str(tmp_path / "tree"), dev=walked.dev, ino=walked.ino)
    gate, code = await hooked(tmp_path, [swapped], state_of(os.getpid()))
    assert not gate.checked and code != 0
    assert gate.refused is not None and "not what was checked" in str(gate.refused)


@pytest.mark.parametrize("state", [b"not json", b'{"pid": true}', b'{"pid": -1}', b"[1]"])
async def test_a_state_without_a_process_stops_the_hook(tmp_path: Path, state: bytes) -> None:
    gate, code = await hooked(tmp_path, [], state)
    assert not gate.checked and code != 0 and gate.refused is not None


def test_podmans_root_is_read_from_the_bundle(tmp_path: Path) -> None:
    (tmp_path / "merged").mkdir()
    (tmp_path / "config.json").write_text(json.dumps({"root": {"path": str(tmp_path / "merged")}}))
    state: dict[str, Any] = {"bundle": str(tmp_path)}
    assert bundle_rootfs(state) == os.path.realpath(tmp_path / "merged")
    (tmp_path / "config.json").write_text(json.dumps({"root": {"path": "merged"}}))
    assert bundle_rootfs(state) == os.path.realpath(tmp_path / "merged")  # relative to it
    for bad in ({}, {"bundle": "relative"}, {"bundle": 3}):
        with pytest.raises(ValueError):
            bundle_rootfs(bad)
