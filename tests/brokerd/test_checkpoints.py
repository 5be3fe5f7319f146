"""brokerd's tree, stored hashes and checkpoint key (10-checkpoints)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from boxmaker.brokerd.log._tiles import TreeStore, scan_tree
from boxmaker.proto.tlog._merkle import consistency_proof, leaf_hash, verify_consistency
from tests.fakes.brokerd import BROKERD, Home, echo, env_for, start


def write_log(audit: Path, count: int, *, torn: bool = False) -> list[bytes]:
    audit.mkdir(parents=True, exist_ok=True)
    lines = [b'{"line":%d}' % i for i in range(count)]
    half = count // 2
    (audit / "2026-11-01.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:half]))
    tail = b"".join(x + b"\n" for x in lines[half:]) + (b'{"torn' if torn else b"")
    (audit / "2026-11-02.jsonl").write_bytes(tail)
    (audit / "notes.jsonl").write_bytes(b"not a day file\n")
    return lines


def naive_root(lines: list[bytes]) -> bytes:
    from tests.proto.tlog.test_merkle import naive_mth

    return naive_mth([leaf_hash(x) for x in lines])


def test_the_tree_is_every_complete_line_in_name_order(tmp_path: Path) -> None:
    lines = write_log(tmp_path, 37, torn=True)
    tree = scan_tree(tmp_path)
    assert tree.size == 37 and tree.root() == naive_root(lines)


def test_missing_and_damaged_stored_hashes_are_rebuilt(tmp_path: Path) -> None:
    lines = write_log(tmp_path, 100)
    store = TreeStore.open(tmp_path)
    assert store.root() == naive_root(lines)
    good = {p.name: p.read_bytes() for p in (tmp_path / "tiles").iterdir()}
    assert (tmp_path / "tiles" / "level-00").stat().st_size == 100 * 32
    store.close()
    (tmp_path / "tiles" / "level-03").unlink()  # missing
    store = TreeStore.open(tmp_path)
    assert {p.name: p.read_bytes() for p in (tmp_path / "tiles").iterdir()} == good
    store.close()
    data = bytearray((tmp_path / "tiles" / "level-06").read_bytes())
    data[5] ^= 1  # damaged: the root they give is wrong
    (tmp_path / "tiles" / "level-06").write_bytes(bytes(data))
    store = TreeStore.open(tmp_path)
    assert {p.name: p.read_bytes() for p in (tmp_path / "tiles").iterdir()} == good
    proof = store.proof(37, 100, None, store.root())
    ref = TreeStore.open(tmp_path)
    assert proof == consistency_proof(37, 100, ref.read)
    assert verify_consistency(37, 100, naive_root(lines[:37]), naive_root(lines), proof)


async def test_damage_while_running_is_found_by_the_proof_and_rebuilt(tmp_path: Path) -> None:
    lines = write_log(tmp_path, 64)
    store = TreeStore.open(tmp_path)
    more = [b'{"more":%d}' % i for i in range(20)]
    with (tmp_path / "2026-11-02.jsonl").open("ab") as stream:
        stream.write(b"".join(x + b"\n" for x in more))
    store.append_lines(more)
    store.flush()
    level = tmp_path / "tiles" / "level-03"  # node 0 covers leaves 0..7: in every proof
    data = bytearray(level.read_bytes())
    data[5] ^= 0xFF
    level.write_bytes(bytes(data))
    from boxmaker.brokerd.log._tiles import StoreDamaged

    with pytest.raises(StoreDamaged):
        store.proof(10, 84, None, store.root())
    with trio.fail_after(30):
        await store.rebuild()
    proof = store.proof(10, 84, None, store.root())
    assert verify_consistency(10, 84, naive_root(lines[:10]), naive_root(lines + more), proof)


def test_a_deleted_key_is_not_replaced_silently() -> None:
    home = Home()
    try:
        proc = start(home)
        echo(home.broker, "hi")
        assert proc.stop() == 0
        key = home.home / "checkpoint.key"
        assert oct(key.stat().st_mode & 0o777) == "0o600"
        pub = (home.home / "checkpoint.pub").read_text()
        key.unlink()
        refused = subprocess.run([str(BROKERD), "serve", "--config", str(home.config)],
                                 env=env_for(home), capture_output=True, text=True,
                                 timeout=60, check=False)
        assert refused.returncode == 1
        assert "docs/runbook.md#checkpoint-key-missing" in refused.stderr
        assert not key.exists()
        proc = start(home, args=("--new-checkpoint-key",))
        assert proc.stop() == 0
        assert "a new checkpoint key was made" in proc.log()
        assert (home.home / "checkpoint.pub").read_text() != pub
        key.chmod(0o644)
        refused = subprocess.run([str(BROKERD), "serve", "--config", str(home.config)],
                                 env=env_for(home), capture_output=True, text=True,
                                 timeout=60, check=False)
        assert refused.returncode == 1 and "0600" in refused.stderr
    finally:
        home.cleanup()


def test_checkpoints_table_is_strict(tmp_path: Path) -> None:
    from boxmaker._brokerd_config import parse_config
    from boxmaker._errors import ConfigError
    from tests.fakes.tlog import log_signer, witness_signer

    home = f'home = "{tmp_path}"\n'
    wkey = witness_signer().verifier.text()
    lkey = log_signer().verifier.text()
    config = parse_config((home + "[checkpoints]\ninterval_ms = 500\nwitnesses = ["
                           f'{{url = "http://w.example:8440/", key = "{wkey}"}}]\n').encode(),
                          None)
    assert config.checkpoints.interval_ms == 500
    assert config.checkpoints.origin.startswith("boxmaker/")
    assert config.checkpoints.witnesses[0].parsed.path_prefix == ""
    assert config.checkpoint_key == tmp_path / "checkpoint.key"
    for bad in (
        "[checkpoints]\nsurprise = 1\n",
        "[checkpoints]\ninterval_ms = 10\n",
        '[checkpoints]\norigin = "has space"\n',
        f'[checkpoints]\nwitnesses = [{{url = "ftp://x", key = "{wkey}"}}]\n',
        f'[checkpoints]\nwitnesses = [{{url = "http://x", key = "{lkey}"}}]\n',
        f'[checkpoints]\nwitnesses = [{{url = "http://x", key = "{wkey}", extra = 1}}]\n',
        '[checkpoints]\nwitnesses = [{url = "http://x", key = "nope"}]\n',
    ):
        with pytest.raises(ConfigError):
            parse_config((home + bad).encode(), None)


def test_the_origin_follows_the_key_when_the_home_moves() -> None:
    """The default origin names the home's path: a moved home keeps its key's name."""
    import shutil

    from boxmaker._keyfile import read_key_file

    first, moved = Home(), Home()
    try:
        proc = start(first)
        echo(first.broker, "hi")
        assert proc.stop() == 0
        name = read_key_file(first.home / "checkpoint.key").name
        for item in ("checkpoint.key", "checkpoint.pub"):
            shutil.copy2(first.home / item, moved.home / item)
        shutil.copytree(first.audit, moved.audit)
        proc = start(moved)
        assert proc.stop() == 0
        signed = (moved.audit / "checkpoints" / "signed.checkpoint").read_text()
        assert signed.startswith(name + "\n")
        other = moved.config.read_text().replace(
            "[approvals]", '[checkpoints]\norigin = "boxmaker/elsewhere/1"\n[approvals]')
        moved.config.write_text(other)
        refused = subprocess.run([str(BROKERD), "serve", "--config", str(moved.config)],
                                 env=env_for(moved), capture_output=True, text=True,
                                 timeout=60, check=False)
        assert refused.returncode == 1 and "checkpoint-key-missing" in refused.stderr
    finally:
        first.cleanup()
        moved.cleanup()
