"""A real `boxmaker witness serve` process on loopback, for tests and benchmarks."""

from __future__ import annotations

import http.client
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

BOXMAKER = Path(sys.executable).parent / "boxmaker"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class WitnessProcess:
    """Writes witness.toml for `logs` (origin -> log verifier key) and runs it."""

    def __init__(self, root: Path, logs: dict[str, str], *, name: str = "witness.test/w1",
                 port: int | None = None) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.config = root / "witness.toml"
        tables = "".join(f'[[log]]\norigin = "{o}"\nkey = "{k}"\n' for o, k in logs.items())
        self.config.write_text(
            f'name = "{name}"\nkey_file = "witness.key"\nstate = "state"\n'
            f'listen = "127.0.0.1:{self.port}"\n{tables}')
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self._key: str | None = None

    def key(self) -> str:
        if self._key is None:
            self._key = self._read_key()
        return self._key

    def _read_key(self) -> str:
        done = subprocess.run([str(BOXMAKER), "witness", "key", "--config", str(self.config)],
                              capture_output=True, check=True, timeout=60)
        return done.stdout.decode().strip()

    def start(self, env: dict[str, str] | None = None) -> None:
        notify_path = self.root / "notify.sock"
        notify_path.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(str(notify_path))
            notify.settimeout(60)
            full = dict(os.environ, NOTIFY_SOCKET=str(notify_path), **(env or {}))
            with open(self.root / "witness.log", "ab") as log:
                self.proc = subprocess.Popen(
                    [str(BOXMAKER), "witness", "serve", "--config", str(self.config)],
                    env=full, stdout=subprocess.DEVNULL, stderr=log)
            try:
                while notify.recv(64) != b"READY=1":
                    pass
            except TimeoutError:
                self.kill()
                raise

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(60)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(60)
        self.proc = None

    def post(self, body: bytes, timeout: float = 30) -> tuple[int, bytes, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", "/add-checkpoint", body=body)
            answer = conn.getresponse()
            return answer.status, answer.read(), answer.getheader("content-type") or ""
        finally:
            conn.close()

    def get(self, path: str, timeout: float = 30) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()


def wait_fifo(fd: int, timeout: float = 60) -> bytes:
    """Block until the witness writes to the FIFO (opened O_RDWR: never EOF)."""
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        raise TimeoutError("the witness did not save in time")
    return os.read(fd, 64)
