"""State files are opened without blocking and must be regular files (issue 22
item 12): the helper itself on real FIFOs, sockets, directories and links, and
the attack against the real components: a FIFO planted in `audit/checkpoints/`
(as ``*.checkpoint``, ``signed.checkpoint``, ``cosigned-<hash>.checkpoint``), as
`checkpoint.pub`, or in the witness's state, must neither hang
`bxctl audit verify --witness-key` nor brokerd's or the witness's start."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker._checkpoint_files import cosigned_name
from boxmaker._error_table import pointer_of
from boxmaker._state_files import NotRegularFile, StateFileTooBig, read_regular
from tests.fakes.brokerd import BXCTL, BrokerdProcess, Home, echo, env_for, start
from tests.fakes.tlog import witness_signer
from tests.fakes.witness_process import BOXMAKER, WitnessProcess

POINTER = "docs/runbook.md#state-file-not-regular"
WITNESS = witness_signer()


def test_only_a_regular_file_is_read(tmp_path: Path) -> None:
    regular = tmp_path / "regular"
    regular.write_bytes(b"x" * 10)
    assert read_regular(regular, 10) == b"x" * 10
    with pytest.raises(StateFileTooBig):
        read_regular(regular, 9)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(regular)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        for name, kind in (("fifo", "a FIFO"), ("dir", "a directory"),
                           ("link", "a symbolic link"), ("dangling", "a symbolic link"),
                           ("sock", "a socket")):
            with pytest.raises(NotRegularFile, match=kind) as caught:
                read_regular(tmp_path / name, 100)
            assert isinstance(caught.value, OSError)
            assert pointer_of(caught.value) == POINTER
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing", 100)
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_regular("regular", 10, dir_fd=dir_fd) == b"x" * 10
        with pytest.raises(NotRegularFile):
            read_regular("fifo", 10, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with pytest.raises(NotRegularFile):
        read_regular("/dev/null", 10)


@pytest.fixture
def home() -> Iterator[Home]:
    home = Home()
    try:
        proc = start(home)
        try:
            echo(home.broker, "hi")
        finally:
            assert proc.stop() == 0
        yield home
    finally:
        home.cleanup()


def verify(home: Home) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), "audit", "verify", str(home.audit),
                           "--witness-key", WITNESS.verifier.text()], env=env_for(home),
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("name", ["planted.checkpoint", "signed.checkpoint",
                                  cosigned_name(WITNESS.verifier)])
def test_a_fifo_in_checkpoints_does_not_hang_verify(home: Home, name: str) -> None:
    target = home.audit / "checkpoints" / name
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    done = verify(home)
    assert done.returncode != 0, done
    assert POINTER in done.stdout + done.stderr, done
    assert name in done.stdout + done.stderr, done


@pytest.mark.parametrize("name", ["signed.checkpoint", cosigned_name(WITNESS.verifier)])
def test_a_fifo_in_checkpoints_does_not_hang_brokerds_start(home: Home, name: str) -> None:
    config = home.config.read_text().replace(
        "[approvals]", "[checkpoints]\nwitnesses = [{url = \"http://127.0.0.1:9\", "
        f'key = "{WITNESS.verifier.text()}"}}]\n[approvals]')
    home.config.write_text(config)
    target = home.audit / "checkpoints" / name
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    proc = BrokerdProcess(home)
    try:
        proc.wait_ready()
        assert echo(home.broker, "again")[0]["result"]["status"] == "ok"
    finally:
        proc.kill()
    assert POINTER in proc.log() and name in proc.log()


def test_a_fifo_as_checkpoint_pub_does_not_hang_bxctl_or_brokerd(home: Home) -> None:
    pub = home.home / "checkpoint.pub"
    pub.unlink()
    os.mkfifo(pub)
    key = subprocess.run([str(BXCTL), "audit", "key"], env=env_for(home),
                         capture_output=True, text=True, timeout=60, check=False)
    assert key.returncode != 0 and POINTER in key.stderr, key
    done = verify(home)
    assert done.returncode != 0 and POINTER in done.stdout + done.stderr, done
    proc = start(home)  # brokerd rewrites checkpoint.pub (an atomic rename)
    assert proc.stop() == 0
    assert pub.is_file()


def test_a_fifo_in_the_witness_state_refuses_its_start(tmp_path: Path) -> None:
    witness = WitnessProcess(tmp_path / "w", {})
    (tmp_path / "w" / "state").mkdir(mode=0o700)
    os.mkfifo(tmp_path / "w" / "state" / ("0" * 64 + ".checkpoint"))
    done = subprocess.run([str(BOXMAKER), "witness", "serve", "--config",
                           str(witness.config)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode != 0 and POINTER in done.stderr, done


def test_the_approval_pages_files_are_never_waited_on(tmp_path: Path) -> None:
    """The page's local CA and the audit day files it follows: a FIFO is refused."""
    from boxmaker.approvals._tls import ensure_local_ca

    certs = tmp_path / "tls"
    certs.mkdir(mode=0o700)
    os.mkfifo(certs / "ca.pem")
    (certs / "ca-key.pem").write_bytes(b"")
    with pytest.raises(NotRegularFile, match="a FIFO"):
        ensure_local_ca(certs, "box.local")


def test_a_fifo_as_a_day_file_does_not_hang_verify(home: Home) -> None:
    os.mkfifo(home.audit / "2099-01-01.jsonl")
    done = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)], env=env_for(home),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode in (0, 1), done
