"""Helpers to run brokerd for tests: a temp home, the real process, raw clients.

Shared by tests/brokerd, tests/integration/test_brokerd_*, tests/reliability/
test_brokerd_*, tests/bxctl/test_admin_cmd.py and scripts/bench/decision.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
VENV_BIN = Path(sys.executable).parent
BROKERD = VENV_BIN / "brokerd"
BXCTL = VENV_BIN / "bxctl"

ECHO_GRANT = """
[[grant]]
id = "echo-all"
tool = "echo"
mode = "allow"
"""


def ask_grant(directory: str) -> str:
    return f"""
[[grant]]
id = "notes-ask"
tool = "read_file"
mode = "ask"
paths = ["{directory}"]
"""


class Home:
    """A brokerd home in a short temp directory (socket paths stay < 108 bytes)."""

    def __init__(self, *, runner: str = "echo", ttl_ms: int = 600_000, fsync: bool = True,
                 grants: dict[str, str] | None = None, extra: str = "",
                 runner_extra: str = "", approvals_extra: str = "",
                 launcher: str | None = "podman") -> None:
        """`launcher`: the `[runner] launcher` key of a podman runner, written after
        `runner_extra` (None: left unset, the default: oci, podman where it cannot).
        Tests name the launcher they test; the podman path's stay on podman."""
        self.root = Path(tempfile.mkdtemp(prefix="bk-", dir="/tmp"))
        self.home = self.root / "home"
        self.home.mkdir(mode=0o700)
        self.grants = self.home / "grants"
        self.grants.mkdir(mode=0o700)
        for name, text in (grants if grants is not None else {"echo.toml": ECHO_GRANT}).items():
            (self.grants / name).write_text(text)
        self.audit = self.home / "audit"
        self.state = self.home / "state"
        self.broker = self.home / "run" / "broker.sock"
        self.admin = self.home / "run" / "admin.sock"
        self.config = self.home / "brokerd.toml"
        launch = (f'launcher = "{launcher}"\n'
                  if runner == "podman" and launcher is not None else "")
        self.config.write_text(
            f'home = "{self.home}"\n'
            "[sockets]\n"
            'broker = "run/broker.sock"\n'
            'admin = "run/admin.sock"\n'
            f"{extra}"
            "[approvals]\n"
            f"ttl_ms = {ttl_ms}\n"
            f"{approvals_extra}"
            "[runner]\n"
            f'kind = "{runner}"\n'
            f"{runner_extra}"
            f"{launch}"
            "[audit]\n"
            f"fsync = {'true' if fsync else 'false'}\n"
        )

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def audit_lines(self) -> list[dict[str, Any]]:
        out = []
        if not self.audit.exists():
            return out
        for name in sorted(os.listdir(self.audit)):
            if name.endswith(".jsonl"):
                for line in (self.audit / name).read_bytes().splitlines():
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
        return out

    def events(self, key: str) -> list[dict[str, Any]]:
        return [r[key] | {"seq": r["seq"]} for r in self.audit_lines() if key in r]


def env_for(home: Home) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XDG_RUNTIME_DIR", None)
    env["BOXMAKER_HOME"] = str(home.home)
    for key in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET"):
        env.pop(key, None)
    return env


class BrokerdProcess:
    """The real `brokerd serve`, ready once it sent READY=1 to our NOTIFY_SOCKET."""

    def __init__(self, home: Home, *, args: tuple[str, ...] = (), preexec: Any = None,
                 timeout: float = 30.0, pipe_stderr: bool = False) -> None:
        self.home = home
        notify_path = home.root / "notify.sock"
        if notify_path.exists():
            notify_path.unlink()
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(notify_path))
        self.notify.settimeout(timeout)
        env = env_for(home)
        env["NOTIFY_SOCKET"] = str(notify_path)
        self.stderr_path = home.root / "brokerd.log"
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(BROKERD), "serve", "--config", str(home.config), *args],
            env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if pipe_stderr else self._stderr, preexec_fn=preexec,  # noqa: PLW1509 - sets rlimits only
        )
        self.messages: list[str] = []
        self._unread = b""  # read from the stderr pipe, not yet a whole line

    def wait_ready(self) -> None:
        while True:
            try:
                data = self.notify.recv(4096)
            except TimeoutError:
                raise AssertionError(f"brokerd not ready: {self.log()}") from None
            self.messages.append(data.decode())
            if data == b"READY=1":
                return

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def read_until(self, text: str, timeout: float = 30.0) -> str:
        """With `pipe_stderr`: read brokerd's log lines until one holds `text` (no line
        for `timeout` seconds fails).

        Reads the pipe itself (os.read into a buffer of its own): a buffered
        readline after select() would leave lines already read from the pipe
        waiting in the reader's buffer until brokerd writes again.
        """
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        seen = []
        while True:
            while b"\n" in self._unread:
                raw, _, self._unread = self._unread.partition(b"\n")
                line = raw.decode(errors="replace") + "\n"
                seen.append(line)
                if text in line:
                    return line
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise AssertionError(f"no {text!r} in brokerd's log: {seen}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"brokerd's log ended without {text!r}: "
                                     f"{[*seen, self._unread.decode(errors='replace')]}")
            self._unread += chunk

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.close()

    def close(self) -> None:
        self.notify.close()
        self._stderr.close()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def start(home: Home, **kwargs: Any) -> BrokerdProcess:
    proc = BrokerdProcess(home, **kwargs)
    proc.wait_ready()
    return proc


def frame(obj: dict[str, Any] | bytes) -> bytes:
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def read_frames(sock: socket.socket) -> Iterator[dict[str, Any]]:
    """Frames until the server closes."""
    buf = b""
    while True:
        while len(buf) >= 4:
            (length,) = struct.unpack(">I", buf[:4])
            if len(buf) < 4 + length:
                break
            yield json.loads(buf[4 : 4 + length])
            buf = buf[4 + length :]
        data = sock.recv(65536)
        if not data:
            return
        buf += data


def connect(path: Path, timeout: float = 30.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def request(path: Path, obj: dict[str, Any] | bytes, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Send one request frame, return every frame until the server closes."""
    with connect(path, timeout) as sock:
        sock.sendall(frame(obj))
        return list(read_frames(sock))


def call_request(session: str, tool: str, args: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"v": 1, "id": rid, "call": {"session": session, "tool": tool, "args": args}}


def echo(path: Path, text: str = "hi", session: str = "s1", rid: int = 1) -> list[dict[str, Any]]:
    return request(path, call_request(session, "echo", {"text": text}, rid))


def admin(path: Path, key: str, body: dict[str, Any], rid: int = 1,
          timeout: float = 30.0) -> dict[str, Any]:
    frames = request(path, {"v": 1, "id": rid, key: body}, timeout=timeout)
    assert len(frames) == 1, frames
    return frames[0]
