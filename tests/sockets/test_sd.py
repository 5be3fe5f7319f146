"""boxmaker._sockets._sd: socket activation (for real, through systemd-socket-activate), notify."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker._sockets import _sd
from tests.conftest import REPO

ACTIVATE = shutil.which("systemd-socket-activate")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose paths fit in a Unix socket address."""
    directory = Path(tempfile.mkdtemp(prefix="bxsd"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


# -- notify ------------------------------------------------------------------------------


def test_notify_sends_one_datagram_to_a_path(short_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = short_dir / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert _sd.notify("READY=1")
        assert _sd.notify("STOPPING=1")
        assert receiver.recv(4096) == b"READY=1"
        assert receiver.recv(4096) == b"STOPPING=1"


def test_notify_to_an_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"boxmaker-test-{secrets.token_hex(8)}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind("\0" + name)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert _sd.notify("READY=1")
        assert receiver.recv(4096) == b"READY=1"


@pytest.mark.parametrize("value", [None, "", "vsock:2:1234", "relative/path"])
def test_notify_without_a_usable_socket_says_false(monkeypatch: pytest.MonkeyPatch,
                                                   value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    else:
        monkeypatch.setenv("NOTIFY_SOCKET", value)
    assert not _sd.notify("READY=1")


def test_notify_to_nothing_listening_says_false(short_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(short_dir / "gone"))
    assert not _sd.notify("READY=1")


# -- listen_fds in this process --------------------------------------------------------------


def test_no_variables_means_no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        monkeypatch.delenv(key, raising=False)
    assert _sd.listen_fds() == {}


def test_variables_meant_for_another_process_are_ignored_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LISTEN_PID", str(os.getpid() + 1))
    monkeypatch.setenv("LISTEN_FDS", "1")
    monkeypatch.setenv("LISTEN_FDNAMES", "infer")
    assert _sd.listen_fds() == {}
    assert "LISTEN_FDS" not in os.environ and "LISTEN_PID" not in os.environ
    assert "LISTEN_FDNAMES" not in os.environ


def test_unix_listener_takes_the_named_listening_socket(short_dir: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(short_dir / "s"))
        sock.listen()
        assert _sd.unix_listener({"infer": [sock]}, "infer") is sock
        assert _sd.unix_listener({"other": [sock]}, "infer") is None


def test_unix_listener_refuses_what_is_not_a_listening_unix_stream(short_dir: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle, \
            socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp, \
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dgram:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        with pytest.raises(_sd.ActivationError, match="not listening"):
            _sd.unix_listener({"infer": [idle]}, "infer")
        with pytest.raises(_sd.ActivationError, match="not a Unix stream"):
            _sd.unix_listener({"infer": [tcp]}, "infer")
        with pytest.raises(_sd.ActivationError, match="not a Unix stream"):
            _sd.unix_listener({"infer": [dgram]}, "infer")
        with pytest.raises(_sd.ActivationError, match="2 sockets"):
            _sd.unix_listener({"infer": [tcp, tcp]}, "infer")


# -- listen_fds for real ---------------------------------------------------------------------

PROBE = """
import json, os, socket
from boxmaker._sockets import _sd
found = _sd.listen_fds()
print(json.dumps({
    "names": {name: [[s.family == socket.AF_UNIX, s.type == socket.SOCK_STREAM,
                      s.get_inheritable()] for s in group] for name, group in found.items()},
    "listener": _sd.unix_listener(found, "infer") is not None,
    "env_left": [k for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES") if k in os.environ],
}))
"""


def wait_listening(proc: subprocess.Popen[str], count: int) -> None:
    """Read systemd-socket-activate's "Listening on ..." lines: then the sockets exist."""
    assert proc.stderr is not None
    seen = 0
    while seen < count:
        line = proc.stderr.readline()
        assert line, "systemd-socket-activate ended before listening"
        if line.startswith("Listening on "):
            seen += 1


@pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed")
def test_sockets_passed_by_systemd_socket_activate_arrive_by_name(short_dir: Path) -> None:
    assert ACTIVATE is not None
    infer, other = short_dir / "infer.sock", short_dir / "other.sock"
    proc = subprocess.Popen(
        [ACTIVATE, "-l", str(infer), "-l", str(other), "--fdname=infer:other",
         sys.executable, "-c", PROBE],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_listening(proc, 2)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(infer))  # the first connection starts the program
        out, err = proc.communicate(timeout=60)
        client.close()
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report == {
        "names": {"infer": [[True, True, False]], "other": [[True, True, False]]},
        "listener": True,
        "env_left": [],
    }


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to start the daemon as another uid")
def test_clients_see_the_daemons_uid_not_the_activators(short_dir: Path) -> None:
    """SO_PEERCRED names whoever called listen() last: root here, until the daemon does."""
    path = short_dir / "loop.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o666)
    listener.listen(8)  # as "systemd" (uid 0)
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon: the socket at fd 3 as systemd hands it, another uid
        status = 1
        try:
            os.close(ready_read)
            os.dup2(listener.fileno(), 3)
            os.setgid(65534)
            os.setuid(65534)
            os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1",
                              LISTEN_FDNAMES="loop")
            taken = _sd.unix_listener(_sd.listen_fds(), "loop")
            assert taken is not None
            os.write(ready_write, b"ready")
            conn, _ = taken.accept()
            conn.close()
            status = 0
        finally:
            os._exit(status)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 16) == b"ready"
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        raw = client.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        client.close()
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(ready_read)
        listener.close()
    assert os.waitstatus_to_exitcode(status) == 0
    assert uid == 65534


# -- what children inherit ---------------------------------------------------------------


async def test_podman_commands_do_not_inherit_activation_or_notify(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """brokerd's podman once saw LISTEN_FDS=2 (the runner starts before the sockets are
    taken), took descriptors 3 and 4 for passed sockets and crashed ("epollwait on fd 4
    failed with 9"); with NOTIFY_SOCKET it would speak to systemd for brokerd."""
    from boxmaker.brokerd.runner._podman_check import podman_command

    monkeypatch.setenv("LISTEN_PID", str(os.getpid()))
    monkeypatch.setenv("LISTEN_FDS", "2")
    monkeypatch.setenv("LISTEN_FDNAMES", "broker:admin")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("BXSD_KEPT", "yes")
    seen = (await podman_command(["env"])).decode().splitlines()
    names = {line.split("=", 1)[0] for line in seen}
    assert "BXSD_KEPT" in names
    assert names.isdisjoint({"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET"})
    assert os.environ["LISTEN_FDS"] == "2"  # brokerd's own environment is left alone
