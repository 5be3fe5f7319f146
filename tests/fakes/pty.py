"""A program on a pseudo-terminal, driven as a person at a keyboard would."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time


class Pty:
    """A command on a pseudo-terminal (bxctl chat, boxmaker up), as an owner runs it."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True, env=env
        )
        os.close(slave)
        self.master = master
        self.seen = b""

    def expect(self, needle: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"never saw {needle!r}; screen so far:\n{self.seen.decode(errors='replace')}"
                )
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError(
                        f"the terminal closed before {needle!r}:\n"
                        f"{self.seen.decode(errors='replace')}"
                    )
                self.seen += data
        return self.seen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self, timeout: float = 60) -> int:
        """Ctrl-D (end of input), then read what is left until the program exits."""
        os.write(self.master, b"\x04")
        deadline = time.monotonic() + timeout
        try:
            while self.process.poll() is None or select.select([self.master], [], [], 0)[0]:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.process.kill()
                    break
                ready, _, _ = select.select([self.master], [], [], min(remaining, 0.5))
                if ready:
                    try:
                        data = os.read(self.master, 65536)
                    except OSError:
                        data = b""
                    if not data:
                        break
                    self.seen += data
            return self.process.wait(timeout=30)
        finally:
            os.close(self.master)
