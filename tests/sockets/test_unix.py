"""Socket binding rules, SO_PEERCRED, and the accept loop's pause (05-brokerd "Serving")."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from boxmaker._sockets._unix import (
    PeerCred,
    SocketSetupError,
    bind_unix_listener,
    peer_credentials,
    served_by,
)
from tests.conftest import REPO

UID = os.geteuid()


def bind(path: Path, *, shared: bool = False, open_socket: bool = False) -> Any:
    return bind_unix_listener(path, shared_dir=shared, open_socket=open_socket, own_uid=UID)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_creates_private_dir_and_socket(tmp_path: Path) -> None:
    sock = bind(tmp_path / "run" / "broker.sock")
    try:
        assert mode(tmp_path / "run") == 0o700
        assert mode(tmp_path / "run" / "broker.sock") == 0o600
        assert stat.S_ISSOCK(os.lstat(tmp_path / "run" / "broker.sock").st_mode)
    finally:
        sock.close()


def test_shared_dir_and_open_socket(tmp_path: Path) -> None:
    sock = bind(tmp_path / "run" / "broker.sock", shared=True, open_socket=True)
    try:
        assert mode(tmp_path / "run") == 0o711
        assert mode(tmp_path / "run" / "broker.sock") == 0o666
    finally:
        sock.close()


def test_existing_private_dir_opened_for_other_uids(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir(mode=0o700)
    bind(tmp_path / "run" / "b.sock", shared=True).close()
    assert mode(tmp_path / "run") == 0o711


def test_refuses_directly_in_root() -> None:
    with pytest.raises(SocketSetupError, match="directly in /"):
        bind(Path("/broker.sock"))


def test_refuses_symlink_component(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(SocketSetupError, match="symbolic link"):
        bind(tmp_path / "link" / "broker.sock")
    (tmp_path / "real" / "x.sock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SocketSetupError, match="symbolic link"):
        bind(tmp_path / "real" / "x.sock")


def test_refuses_writable_or_foreign_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    os.chmod(run, 0o770)
    with pytest.raises(SocketSetupError, match="writable by group or others"):
        bind(run / "b.sock")
    os.chmod(run, 0o700)
    if UID == 0:
        os.chown(run, 65534, 65534)
        with pytest.raises(SocketSetupError, match="belongs to uid 65534"):
            bind(run / "b.sock")
    with pytest.raises(SocketSetupError, match="belongs to uid"):
        bind_unix_listener(tmp_path / "run2" / "b.sock", shared_dir=False, open_socket=False,
                           own_uid=UID + 1) if (tmp_path / "run2").mkdir() is None else None


def test_refuses_non_socket_and_live_socket_replaces_stale(tmp_path: Path) -> None:
    (tmp_path / "file.sock").write_text("x")
    with pytest.raises(SocketSetupError, match="not a socket"):
        bind(tmp_path / "file.sock")
    live = bind(tmp_path / "live.sock")
    try:
        with pytest.raises(SocketSetupError, match="already listening"):
            bind(tmp_path / "live.sock")
    finally:
        live.close()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(tmp_path / "stale.sock"))
    stale.close()
    bind(tmp_path / "stale.sock").close()


def test_refuses_too_long(tmp_path: Path) -> None:
    with pytest.raises(SocketSetupError, match="too long"):
        bind(tmp_path / ("x" * 120))


def test_peer_credentials() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        cred = peer_credentials(a)
        assert (cred.pid, cred.uid, cred.gid) == (os.getpid(), os.getuid(), os.getgid())



UNSHARE = shutil.which("unshare")

_PID1_SERVER = r"""
import json, os, socket, sys
from boxmaker._sockets._unix import peer_credentials, served_by
path = sys.argv[1]
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()            # pid 1 of this pid namespace, as root: the service manager's place
child = os.fork()
if child == 0:             # a client in the same namespace, as every client of systemd is
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    cred = peer_credentials(client)
    print(json.dumps({"pid": cred.pid, "uid": cred.uid, "served_by_4242": served_by(cred, 4242)}))
    sys.stdout.flush()
    os._exit(0)
os.waitpid(child, 0)
"""


@pytest.mark.skipif(UNSHARE is None or os.getuid() != 0, reason="needs root and unshare(1)")
def test_a_socket_still_held_by_the_service_manager_counts_as_the_daemons(
        tmp_path: Path) -> None:
    """The connection that starts a socket-activated daemon sees pid 1 (systemd), uid 0."""
    assert UNSHARE is not None
    done = subprocess.run(
        [UNSHARE, "--pid", "--fork", "--kill-child", sys.executable, "-c", _PID1_SERVER,
         str(tmp_path / "s.sock")],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"pid": 1, "uid": 0, "served_by_4242": True}


def test_any_other_root_server_is_not_the_daemons(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(str(path))
        server.listen()
        client.connect(str(path))
        cred = peer_credentials(client)
        assert cred.pid == os.getpid() != 1
        assert served_by(cred, cred.uid)
        assert not served_by(cred, cred.uid + 4242)
        assert not served_by(PeerCred(pid=2, uid=0, gid=0), 4242)
        assert not served_by(PeerCred(pid=1, uid=4243, gid=0), 4242)
