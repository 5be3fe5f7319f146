"""`inferproxy serve` as a real process: readiness, forwarding, signals, start failures,
and socket activation for real with systemd-socket-activate."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from boxmaker._http import Endpoint
from boxmaker._http.client import fetch
from tests.conftest import REPO
from tests.fakes.http_upstream import HttpUpstream

KEY = "sk-process-test-51c0ffee"
POINTER = "docs/runbook.md#inferproxy-start-failed"
ACTIVATE = shutil.which("systemd-socket-activate")
INFERPROXY = [sys.executable, "-m", "boxmaker.inferproxy"]


@pytest.fixture
def home() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="bxipp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")}
    env["BOXMAKER_HOME"] = str(home)
    env.pop("XDG_RUNTIME_DIR", None)
    return env


def write_config(home: Path, port: int, *, key: bool = True) -> Path:
    lines = [f'home = "{home}"', 'socket = "run/infer.sock"',
             f'upstream = "http://127.0.0.1:{port}"']
    if key:
        (home / "infer.key").write_text(KEY + "\n")
        (home / "infer.key").chmod(0o600)
        lines.append('api_key_file = "infer.key"')
    path = home / "inferproxy.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@asynccontextmanager
async def notify_socket(home: Path) -> AsyncIterator[trio.socket.SocketType]:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with sock:
        await sock.bind(str(home / "notify"))
        yield sock


async def collect(stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
    assert stream is not None
    while data := await stream.receive_some(65536):
        into.extend(data)


async def test_serve_forwards_is_ready_and_stops_cleanly_on_sigterm(home: Path) -> None:
    upstream = HttpUpstream()
    stderr = bytearray()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery, notify_socket(home) as notify:
            port = await nursery.start(upstream.serve)
            config = write_config(home, port)
            env = child_env(home) | {"NOTIFY_SOCKET": str(home / "notify")}
            proc = await trio.lowlevel.open_process(
                [*INFERPROXY, "serve", "--config", str(config)], cwd=REPO, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                stderr_read = trio.Event()

                async def read_stderr() -> None:
                    await collect(proc.stderr, stderr)
                    stderr_read.set()

                nursery.start_soon(read_stderr)
                assert await notify.recv(4096) == b"READY=1"
                sock_path = home / "run" / "infer.sock"
                assert (os.lstat(sock_path).st_mode & 0o777) == 0o600
                response = await fetch(Endpoint.unix(sock_path), "GET", "/health")
                assert response.status == 200
                refused = await fetch(Endpoint.unix(sock_path), "GET", "/metrics")
                assert refused.status == 403
                proc.send_signal(signal.SIGTERM)
                assert await notify.recv(4096) == b"STOPPING=1"
                assert await proc.wait() == 0
                await stderr_read.wait()  # all it wrote, up to its exit
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            nursery.cancel_scope.cancel()
    assert upstream.requests[0].header_values(b"authorization") == [f"Bearer {KEY}".encode()]
    assert not sock_path.exists()
    text = stderr.decode()
    assert "listening on" in text and "GET /health -> 200" in text
    assert KEY not in text


async def test_sigint_stops_it_too(home: Path) -> None:
    with trio.fail_after(60):
        async with notify_socket(home) as notify:
            config = write_config(home, 9, key=False)
            env = child_env(home) | {"NOTIFY_SOCKET": str(home / "notify")}
            proc = await trio.lowlevel.open_process(
                [*INFERPROXY, "serve", "--config", str(config)], cwd=REPO, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            try:
                assert await notify.recv(4096) == b"READY=1"
                proc.send_signal(signal.SIGINT)
                assert await proc.wait() == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()


def run_serve(home: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*INFERPROXY, "serve", "--config", str(config)], cwd=REPO,
                          env=child_env(home), capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("setup", "said"), [
    ("missing-config", "cannot read"),
    ("no-upstream", "upstream"),
    ("missing-key", "api_key_file"),
    ("symlinked-socket-dir", "symbolic link"),
])
def test_start_failures_exit_1_with_the_runbook_pointer(home: Path, setup: str,
                                                         said: str) -> None:
    config = write_config(home, 9)
    if setup == "missing-config":
        config = home / "nope.toml"
    elif setup == "no-upstream":
        config.write_text(f'home = "{home}"\n')
    elif setup == "missing-key":
        (home / "infer.key").unlink()
    else:
        (home / "elsewhere").mkdir(mode=0o700)
        (home / "run").symlink_to(home / "elsewhere")
    result = run_serve(home, config)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("inferproxy: ") and last.endswith(POINTER)
    assert said in last
    assert KEY not in result.stderr


# -- socket activation -----------------------------------------------------------------------


async def wait_listening(stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
    """Read systemd-socket-activate's stderr until it says it listens."""
    assert stream is not None
    while b"Listening on " not in into:
        data = await stream.receive_some(65536)
        assert data, into.decode()
        into.extend(data)


@pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed")
async def test_socket_activation_with_the_infer_name(home: Path) -> None:
    assert ACTIVATE is not None
    upstream = HttpUpstream()
    activated = home / "act" / "infer.sock"
    activated.parent.mkdir(mode=0o700)
    stderr = bytearray()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery, notify_socket(home) as notify:
            port = await nursery.start(upstream.serve)
            config = write_config(home, port)
            proc = await trio.lowlevel.open_process(
                [ACTIVATE, "-l", str(activated), "--fdname=infer",
                 "-E", f"NOTIFY_SOCKET={home / 'notify'}",
                 *INFERPROXY, "serve", "--config", str(config)],
                cwd=REPO, env=child_env(home), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                await wait_listening(proc.stderr, stderr)
                nursery.start_soon(collect, proc.stderr, stderr)
                # the first connection starts inferproxy, which takes the socket over
                response = await fetch(Endpoint.unix(activated), "GET", "/props",
                                       timeout_s=30)
                assert response.status == 200
                assert await notify.recv(4096) == b"READY=1"
                proc.send_signal(signal.SIGTERM)
                assert await proc.wait() == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            nursery.cancel_scope.cancel()
    assert upstream.requests[0].target == b"/props"
    assert activated.exists(), "a socket systemd made is systemd's to remove"
    assert not (home / "run" / "infer.sock").exists(), "the configured path was not bound"
    assert "from systemd" in stderr.decode()


@pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed")
async def test_activation_without_a_socket_named_infer_fails_closed(home: Path) -> None:
    assert ACTIVATE is not None
    activated = home / "act.sock"
    stderr = bytearray()
    with trio.fail_after(60):
        config = write_config(home, 9)
        proc = await trio.lowlevel.open_process(
            [ACTIVATE, "-l", str(activated), "--fdname=other",
             *INFERPROXY, "serve", "--config", str(config)],
            cwd=REPO, env=child_env(home), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            await wait_listening(proc.stderr, stderr)
            client = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with client:
                await client.connect(str(activated))  # starts the program
                await collect(proc.stderr, stderr)
            assert await proc.wait() == 1
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    last = stderr.decode().strip().splitlines()[-1]
    assert "none named 'infer'" in last and last.endswith(POINTER)
