"""Socket activation with the real `systemd-socket-activate`, and readiness with a
real NOTIFY_SOCKET datagram socket (05-brokerd "Serving", 09-operations)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess

import pytest

from tests.fakes.brokerd import BROKERD, Home, admin, echo, env_for

ACTIVATE = shutil.which("systemd-socket-activate")


@pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed")
def test_socket_activation_and_readiness() -> None:
    home = Home()
    run = home.home / "run"
    run.mkdir(mode=0o700)
    notify_path = home.root / "notify.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(30)
    env = env_for(home)
    proc = subprocess.Popen(
        [str(ACTIVATE), "-l", str(home.broker), "-l", str(home.admin),
         "--fdname=broker:admin", "-E", f"NOTIFY_SOCKET={notify_path}",
         "-E", f"BOXMAKER_HOME={home.home}",
         str(BROKERD), "serve", "--config", str(home.config)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        listening = [proc.stderr.readline() for _ in range(2)]
        assert all(b"Listening on" in line for line in listening), listening
        # The listening sockets exist before brokerd does; the first connection
        # makes systemd-socket-activate start it with LISTEN_FDS.
        answer = echo(home.broker, "activated")
        assert answer[0]["result"]["output"] == {"text": "activated"}
        assert notify.recv(4096) == b"READY=1"
        status = admin(home.admin, "status", {})["status"]
        assert status["audit"]["ok"]
        start = home.events("start")[0]
        assert start["pid"] == proc.pid  # systemd-socket-activate execs brokerd in place
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert notify.recv(4096) == b"STOPPING=1"
        assert home.audit_lines()[-1]["stop"] == {"reason": "shutdown"}
        # brokerd did not bind (or unlink) the sockets itself: they are systemd's.
        assert os.path.exists(home.broker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        assert proc.stderr is not None
        proc.stderr.close()
        notify.close()
        home.cleanup()
