"""brokerd's checkpoints at start, while serving and at stop
(boxmaker/brokerd/log/_checkpoints_link.py), on a real home and audit directory.

The config is given as the few settings this module reads (the brokerd config
model is being moved by issue 12); the writer as the one hook it sets.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._checkpoint_config import CheckpointSettings
from boxmaker._checkpoint_files import SIGNED, read_checkpoint, save_checkpoint
from boxmaker._error_table import pointer_of
from boxmaker._keyfile import create_key_file, read_key_file
from boxmaker.brokerd.log._checkpoints_link import CheckpointKeyProblem, open_checkpoints
from boxmaker.proto.tlog._checkpoint import Checkpoint, parse_signed_checkpoint, sign_checkpoint
from boxmaker.proto.tlog._note import TYPE_ED25519, parse_verifier_key
from boxmaker.proto.wire._wire import format_ts
from tests.fakes.audit_log import valid_log


def config(home: Path, *, origin: str = "boxmaker/test/0", explicit: bool = False) -> Any:
    return types.SimpleNamespace(
        audit=home / "audit", checkpoint_key=home / "checkpoint.key",
        checkpoint_pub=home / "checkpoint.pub", fsync=False,
        checkpoints=CheckpointSettings(origin=origin, origin_explicit=explicit,
                                       interval_ms=1000))


def writer() -> Any:
    return types.SimpleNamespace(on_durable=None)


def home_with_log(tmp_path: Path, calls: int = 3) -> Path:
    home = tmp_path / "home"
    (home / "audit").mkdir(parents=True)
    if calls:
        valid_log(calls, files=1).write(home / "audit")
    return home


def test_first_start_makes_the_key_and_its_public_half(tmp_path: Path) -> None:
    home = home_with_log(tmp_path, calls=0)
    hook = writer()
    runtime = open_checkpoints(config(home), hook, new_key=False, wall_clock=lambda: 0.0)
    key = read_key_file(home / "checkpoint.key")
    assert key.name == "boxmaker/test/0"
    assert parse_verifier_key((home / "checkpoint.pub").read_text().strip()) == key.verifier
    assert hook.on_durable == runtime.checkpointer.on_durable
    assert runtime.warnings == [] and runtime.pushers == []


def test_a_deleted_key_is_never_replaced_silently(tmp_path: Path) -> None:
    home = home_with_log(tmp_path)
    with pytest.raises(CheckpointKeyProblem, match="never replaced silently") as caught:
        open_checkpoints(config(home), writer(), new_key=False, wall_clock=lambda: 0.0)
    assert pointer_of(caught.value) == "docs/runbook.md#checkpoint-key-missing"
    assert not (home / "checkpoint.key").exists()
    runtime = open_checkpoints(config(home), writer(), new_key=True, wall_clock=lambda: 0.0)
    assert any("new checkpoint key" in w for w in runtime.warnings)


def test_the_origin_follows_the_existing_key_unless_set(tmp_path: Path) -> None:
    home = home_with_log(tmp_path)
    create_key_file(home / "checkpoint.key", "boxmaker/old-host/0", TYPE_ED25519)
    runtime = open_checkpoints(config(home, origin="boxmaker/new-host/1"), writer(),
                               new_key=False, wall_clock=lambda: 0.0)
    assert runtime.checkpointer.origin == "boxmaker/old-host/0"
    with pytest.raises(CheckpointKeyProblem, match="cannot be used"):
        open_checkpoints(config(home, origin="boxmaker/new-host/1", explicit=True), writer(),
                         new_key=False, wall_clock=lambda: 0.0)


def test_a_log_shorter_or_other_than_its_last_checkpoint_is_a_warning(tmp_path: Path) -> None:
    home = home_with_log(tmp_path)
    signer = create_key_file(home / "checkpoint.key", "boxmaker/test/0", TYPE_ED25519)
    runtime = open_checkpoints(config(home), writer(), new_key=False, wall_clock=lambda: 0.0)
    size = runtime.checkpointer.store.size
    longer = sign_checkpoint(Checkpoint(origin="boxmaker/test/0", size=size + 5,
                                        root=b"\x01" * 32), signer)
    save_checkpoint(home / "audit", SIGNED, longer.encode(), fsync=False)
    again = open_checkpoints(config(home), writer(), new_key=False, wall_clock=lambda: 0.0)
    assert any("truncated?" in w for w in again.warnings)
    other = sign_checkpoint(Checkpoint(origin="boxmaker/test/0", size=size, root=b"\x02" * 32),
                            signer)
    save_checkpoint(home / "audit", SIGNED, other.encode(), fsync=False)
    third = open_checkpoints(config(home), writer(), new_key=False, wall_clock=lambda: 0.0)
    assert any("rewritten?" in w for w in third.warnings)


async def test_stop_signs_the_last_checkpoint_and_status_shows_it(tmp_path: Path) -> None:
    home = home_with_log(tmp_path)
    runtime = open_checkpoints(config(home), writer(), new_key=True, wall_clock=lambda: 1e9)
    runtime.checkpointer.on_durable([b"one more line"])
    with trio.fail_after(30):
        await runtime.stop()
    data = read_checkpoint(home / "audit", SIGNED)
    assert data is not None
    size = parse_signed_checkpoint(data).checkpoint.size
    assert size == runtime.checkpointer.store.size
    status = runtime.status(format_ts_of)
    assert status.size == size and status.signed_at == format_ts_of(1e9)
    assert status.witnesses == []


def format_ts_of(seconds: float) -> str:
    import datetime as dt

    return format_ts(dt.datetime.fromtimestamp(seconds, dt.UTC))


def test_a_time_that_cannot_be_shown_is_shown_as_none() -> None:
    """Issue 22 item 11: no kept value makes `status` fail."""
    from boxmaker.brokerd.log._checkpoints_link import _shown
    from boxmaker.proto.wire._wire import ts_from_unix

    assert _shown(ts_from_unix, None) is None
    assert _shown(ts_from_unix, 0) == ts_from_unix(0)
    for bad in (2**63 - 1, 253402300800, float("inf"), float("nan"), -1e20):
        assert _shown(ts_from_unix, bad) is None
