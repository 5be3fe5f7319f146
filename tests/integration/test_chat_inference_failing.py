"""`bxctl chat` while inference fails under socket activation (issue 22 item 18).

As under systemd, the test holds the listening sockets (loop.sock, and in one
case infer.sock) and hands them to real daemons with ``LISTEN_FDS``, so a
connection waits in a socket's queue across a daemon's exit, as it does across
systemd's restarts.  Real processes all through: the scripted llama-server
(requiring an API key, /health public as llama-server's), `inferproxy serve`,
`loopd serve`, `bxctl chat --say`.  The chat must say within seconds that
inference is failing, with the runbook pointer, instead of waiting.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
RIGHT_KEY = "sk-right-0c7a11ed"
POINTER = "docs/runbook.md#inference-unavailable"


@pytest.fixture
def root() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="bxinf", dir="/tmp"))
    yield directory
    if os.environ.get("BX_KEEP") is None:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(directory)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")}


def listening(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(16)
    return sock


def activated(argv: list[str], sock: socket.socket, name: str,
              log: Path) -> subprocess.Popen[bytes]:
    """`argv` with `sock` as fd 3 named `name`, as systemd starts a socket's service."""
    fd = sock.fileno()
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-c", _EXEC_ACTIVATED, str(fd), name, *argv],
                                pass_fds=(fd,), env=clean_env(), stdout=out, stderr=out,
                                cwd=REPO)


_EXEC_ACTIVATED = """
import os, sys
fd, name, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
if fd != 3:
    os.dup2(fd, 3, inheritable=True)
    os.close(fd)
os.environ.update(LISTEN_FDS="1", LISTEN_FDNAMES=name, LISTEN_PID=str(os.getpid()))
os.execv(argv[0], argv)
"""


def start_llama(root: Path) -> tuple[subprocess.Popen[str], int]:
    script = root / "llama.json"
    script.write_text(json.dumps({
        "api_key": RIGHT_KEY,
        "props": {"total_slots": 4, "n_ctx": 262144, "supports_tool_calls": True},
        "default_turn": {"steps": [{"role": "assistant"}, {"text": "hello"},
                                   {"finish": "stop"}, {"usage": True}]},
    }))
    llama = subprocess.Popen([sys.executable, "-m", "tests.fakes.llama_server", "--script",
                              str(script), "--host", "127.0.0.1", "--port", "0"], cwd=REPO,
                             stdout=subprocess.PIPE, text=True, env=clean_env())
    assert llama.stdout is not None
    line = llama.stdout.readline()
    assert line.startswith("listening on http://127.0.0.1:"), line
    return llama, int(line.strip().rsplit(":", 1)[1])


def write_configs(root: Path, port: int, key: str) -> tuple[Path, Path, Path]:
    (root / "run").mkdir(mode=0o700)
    (root / "infer.key").write_text(key + "\n")
    (root / "infer.key").chmod(0o600)
    inferproxy = root / "inferproxy.toml"
    inferproxy.write_text(f'home = "{root}"\nsocket = "{root / "unused" / "infer.sock"}"\n'
                          f'upstream = "http://127.0.0.1:{port}"\napi_key_file = "infer.key"\n')
    loopd = root / "loopd.toml"
    loopd.write_text(f'home = "{root / "home"}"\nsocket = "{root / "unused" / "loop.sock"}"\n'
                     f'[inference]\nsocket = "{root / "run" / "infer.sock"}"\n[broker]\n'
                     f'socket = "{root / "broker.sock"}"\n[loop]\ntools = ["echo"]\n')
    bxctl = root / "bxctl.toml"
    bxctl.write_text(f'home = "{root}"\nloop_socket = "{root / "run" / "loop.sock"}"\n')
    return inferproxy, loopd, bxctl


def chat_starting(bxctl: Path, loop_sock: socket.socket, loopd_argv: list[str],
                  log: Path) -> tuple[subprocess.CompletedProcess[str], float,
                                      subprocess.Popen[bytes]]:
    """`bxctl chat --say`; loopd started by its connection, as systemd starts it."""
    started = time.monotonic()
    proc = subprocess.Popen([str(BIN / "bxctl"), "--config", str(bxctl), "chat", "--say", "hi"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env() | {"COLUMNS": "400"})
    try:
        readable, _, _ = select.select([loop_sock], [], [], 60)  # the chat's connection
        assert readable, "bxctl never connected"
        loopd = activated(loopd_argv, loop_sock, "loop", log)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return result, time.monotonic() - started, loopd


def stop(*procs: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def test_a_wrong_key_is_said_within_seconds(root: Path) -> None:
    """inferproxy forwards with a key the server refuses (401): loopd's self-test
    fails at its start, and the chat that started it is told, not left queued."""
    llama, port = start_llama(root)
    inferproxy_cfg, loopd_cfg, bxctl_cfg = write_configs(root, port, "sk-wrong-key")
    infer_sock = listening(root / "run" / "infer.sock")
    loop_sock = listening(root / "run" / "loop.sock")
    inferproxy = activated([str(BIN / "inferproxy"), "serve", "--config", str(inferproxy_cfg)],
                           infer_sock, "infer", root / "inferproxy.log")
    loopd: subprocess.Popen[bytes] | None = None
    try:
        result, took, loopd = chat_starting(
            bxctl_cfg, loop_sock, [str(BIN / "loopd"), "serve", "--config", str(loopd_cfg)],
            root / "loopd.log")
        assert loopd.wait(timeout=30) == 1  # loopd refused to start, after answering
    finally:
        stop(*([loopd] if loopd else []), inferproxy, llama)
        infer_sock.close()
        loop_sock.close()
        if llama.stdout is not None:
            llama.stdout.close()
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert took < 15, took
    assert "inference" in said and "401" in said and "Invalid API Key" in said, said
    assert POINTER in said, said
    assert "sk-wrong-key" not in said and RIGHT_KEY not in said
    assert "/props -> 401" in (root / "inferproxy.log").read_text()


def test_an_inferproxy_restarting_for_ever_is_said_within_seconds(root: Path) -> None:
    """inferproxy refuses its key file and exits (systemd would start it again every
    5 s); loopd's /health waits in infer.sock's queue, which outlives inferproxy."""
    llama, port = start_llama(root)
    inferproxy_cfg, loopd_cfg, bxctl_cfg = write_configs(root, port, "two words")
    infer_sock = listening(root / "run" / "infer.sock")
    loop_sock = listening(root / "run" / "loop.sock")
    inferproxy = activated([str(BIN / "inferproxy"), "serve", "--config", str(inferproxy_cfg)],
                           infer_sock, "infer", root / "inferproxy.log")
    assert inferproxy.wait(timeout=30) == 1
    loopd: subprocess.Popen[bytes] | None = None
    try:
        result, took, loopd = chat_starting(
            bxctl_cfg, loop_sock, [str(BIN / "loopd"), "serve", "--config", str(loopd_cfg)],
            root / "loopd.log")
        assert loopd.wait(timeout=30) == 1
    finally:
        stop(*([loopd] if loopd else []), inferproxy, llama)
        infer_sock.close()
        loop_sock.close()
        if llama.stdout is not None:
            llama.stdout.close()
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert took < 20, took
    assert "inference" in said and POINTER in said, said
    assert "inferproxy-start-failed" in (root / "inferproxy.log").read_text()


def test_an_inferproxy_that_breaks_after_loopd_started_is_said_within_seconds(
        root: Path) -> None:
    """Another timing: loopd passed its self-test and serves; then inferproxy goes
    (a changed key it refuses, restarting for ever) while infer.sock stays."""
    llama, port = start_llama(root)
    inferproxy_cfg, loopd_cfg, bxctl_cfg = write_configs(root, port, RIGHT_KEY)
    infer_sock = listening(root / "run" / "infer.sock")
    loop_sock = listening(root / "run" / "loop.sock")
    inferproxy = activated([str(BIN / "inferproxy"), "serve", "--config", str(inferproxy_cfg)],
                           infer_sock, "infer", root / "inferproxy.log")
    loopd: subprocess.Popen[bytes] | None = None
    try:
        result, _, loopd = chat_starting(
            bxctl_cfg, loop_sock, [str(BIN / "loopd"), "serve", "--config", str(loopd_cfg)],
            root / "loopd.log")
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert "hello" in result.stdout
        inferproxy.terminate()
        assert inferproxy.wait(timeout=30) == 0
        started = time.monotonic()
        again = subprocess.run([str(BIN / "bxctl"), "--config", str(bxctl_cfg), "chat",
                                "--say", "hi"], capture_output=True, text=True, timeout=60,
                               check=False, env=clean_env() | {"COLUMNS": "400"})
        took = time.monotonic() - started
        assert loopd.poll() is None  # loopd goes on serving
    finally:
        stop(*([loopd] if loopd else []), inferproxy, llama)
        infer_sock.close()
        loop_sock.close()
        if llama.stdout is not None:
            llama.stdout.close()
    said = again.stdout + again.stderr
    assert again.returncode == 1, said
    assert took < 20, took
    assert "inference" in said and POINTER in said, said
