"""The whole stack as real processes for scripts/soak, each restartable.

brokerd (podman runner with the tools image when there is one, else echo),
inferproxy, loopd and a scripted llama-server stand-in (tests/fakes/
llama_server.py on a loopback port) whose every tool call carries arguments
unique to it, so that what a client saw can be found in the audit log.  The
audit directory sits on a small tmpfs mounted by the stack (root only) so
that it can be filled.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.fakes.brokerd import BrokerdProcess, Home

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
AUDIT_FS_BYTES = 64 * 1024 * 1024
TURNS_PER_SCRIPT = 6000
DENIED_EVERY = 7
REAL_FILE_EVERY = 4


def tool_call_of(index: int, notes: Path, podman: bool) -> tuple[str, dict[str, Any]]:
    """The tool and arguments of the stand-in's `index`-th tool call (unique)."""
    if index % DENIED_EVERY == 0:
        return "list_dir", {"path": f"/etc/soak-{index}"}  # no grant: denied
    if podman:
        return "read_file", {"path": f"{notes}/soak-{index}.md"}
    return "echo", {"text": f"soak-{index}"}


def llama_script(base: int, notes: Path, podman: bool) -> dict[str, Any]:
    turns = []
    for number in range(TURNS_PER_SCRIPT):
        index = base + number
        if number % 2:
            turns.append({"steps": [{"role": "assistant"}, {"text": f"Done {index}."},
                                    {"finish": "stop"}, {"usage": True}]})
            continue
        tool, args = tool_call_of(index, notes, podman)
        text = json.dumps(args)
        turns.append({"steps": [
            {"role": "assistant"}, {"text": "Let me look."},
            {"tool_call": {"index": 0, "id": f"call{index}", "name": tool,
                           "arguments": [text[:7], text[7:]]}},
            {"finish": "tool_calls"}, {"usage": True}]})
    return {"props": {"total_slots": 4, "n_ctx": 262144, "supports_tool_calls": True},
            "turns": turns,
            "default_turn": {"steps": [{"role": "assistant"}, {"text": "ok"},
                                       {"finish": "stop"}]}}


def podman_image() -> str | None:
    if shutil.which("podman") is None:
        return None
    done = subprocess.run([str(REPO / "scripts" / "build-tools-image"), "--check"],
                          capture_output=True, text=True, check=False, timeout=300)
    return done.stdout.strip() if done.returncode == 0 else None


def grants(notes: Path) -> dict[str, str]:
    return {"soak.toml": f"""
[[grant]]
id = "soak-echo"
tool = "echo"
mode = "allow"

[[grant]]
id = "soak-notes"
tool = "read_file"
mode = "allow"
paths = ["{notes}"]
"""}


class Daemon:
    """A loopd or inferproxy process, ready once it sent READY=1."""

    def __init__(self, argv: list[str], root: Path, name: str) -> None:
        self.argv, self.root, self.name = argv, root, name
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> None:
        path = self.root / f"{self.name}-notify.sock"
        path.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(str(path))
            notify.settimeout(timeout)
            env = dict(os.environ, NOTIFY_SOCKET=str(path))
            env.pop("LISTEN_FDS", None)
            with open(self.root / f"{self.name}.log", "ab") as log:
                self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, env=env,
                                             cwd=REPO)
            while True:
                try:
                    data = notify.recv(4096)
                except TimeoutError:
                    raise RuntimeError(f"{self.name} not ready") from None
                if data == b"READY=1":
                    return

    def signal(self, number: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(number)

    def stop(self, timeout: float = 60) -> int | None:
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)

    def kill(self) -> None:
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            self.proc.wait(60)


class Stack:
    def __init__(self, *, podman: bool, audit_fs: bool) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bxsoak-", dir="/tmp"))
        self.notes = self.root / "notes"
        self.notes.mkdir()
        self.image = podman_image() if podman else None
        self.podman = self.image is not None
        self.auditfs = self.root / "auditfs"
        self.auditfs.mkdir()
        self.audit_fs_mounted = False
        if audit_fs and os.geteuid() == 0:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o",
                                   f"size={AUDIT_FS_BYTES},mode=0700", "bxsoak", str(self.auditfs)],
                                  capture_output=True, text=True, check=False)
            self.audit_fs_mounted = done.returncode == 0
        self.audit = self.auditfs / "audit"
        runner_extra = ""
        if self.podman:
            runner_extra = (f'podman = "podman"\nimage = "{self.image}"\noci_runtime = "runc"\n'
                            "timeout_ms = 20000\n")
        self.home = Home(runner="podman" if self.podman else "echo", grants=grants(self.notes),
                         extra=f'[paths]\naudit = "{self.audit}"\n', runner_extra=runner_extra)
        self.brokerd: BrokerdProcess | None = None
        self.brokerd_nofile: int | None = None
        self.llama_base = 0
        self.llama: subprocess.Popen[bytes] | None = None
        self.llama_port = 0
        run = self.root / "run"
        run.mkdir(mode=0o700)
        self.infer_sock = run / "infer.sock"
        self.loop_sock = run / "loop.sock"
        self.loop_home = self.root / "loop"
        self.loop_home.mkdir()
        self.infer_home = self.root / "infer"
        self.infer_home.mkdir()
        self.conversations = self.loop_home / "conversations"
        self.keep = False

    # -- brokerd ---------------------------------------------------------------

    def start_brokerd(self, *, nofile: int | None = None) -> None:
        self.brokerd_nofile = nofile

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.brokerd = BrokerdProcess(self.home, timeout=120, preexec=limit)
        self.brokerd.wait_ready()

    def kill_brokerd(self) -> None:
        assert self.brokerd is not None
        self.brokerd.kill()

    def stop_brokerd(self) -> int:
        assert self.brokerd is not None
        try:
            return self.brokerd.stop(90)
        except subprocess.TimeoutExpired:
            self.brokerd.kill()
            return -9

    # -- the llama-server stand-in ----------------------------------------------------

    def start_llama(self) -> None:
        for index in range(self.llama_base, self.llama_base + TURNS_PER_SCRIPT, REAL_FILE_EVERY):
            (self.notes / f"soak-{index}.md").write_text(f"note {index}\n")
        script = self.root / f"llama-{self.llama_base}.json"
        script.write_text(json.dumps(llama_script(self.llama_base, self.notes, self.podman)))
        with open(self.root / "llama.log", "ab") as log:
            self.llama = subprocess.Popen(
                [sys.executable, "-m", "tests.fakes.llama_server", "--script", str(script),
                 "--host", "127.0.0.1", "--port", str(self.llama_port)],
                cwd=REPO, stdout=subprocess.PIPE, stderr=log)
        assert self.llama.stdout is not None
        line = self.llama.stdout.readline().decode()
        if not line.startswith("listening on http://127.0.0.1:"):
            raise RuntimeError(f"the llama stand-in did not start: {line!r}")
        self.llama_port = int(line.rsplit(":", 1)[1])

    def kill_llama(self) -> None:
        assert self.llama is not None
        self.llama.kill()
        self.llama.wait(60)
        if self.llama.stdout is not None:
            self.llama.stdout.close()
        self.llama_base += TURNS_PER_SCRIPT  # the next one's tool calls are new ones

    # -- inferproxy and loopd -----------------------------------------------------------

    def make_daemons(self) -> None:
        infer_config = self.root / "inferproxy.toml"
        infer_config.write_text(f'home = "{self.infer_home}"\nsocket = "{self.infer_sock}"\n'
                                f'upstream = "http://127.0.0.1:{self.llama_port}"\n')
        loop_config = self.root / "loopd.toml"
        loop_config.write_text(
            f'home = "{self.loop_home}"\nsocket = "{self.loop_sock}"\n'
            f'[inference]\nsocket = "{self.infer_sock}"\n'
            f'[broker]\nsocket = "{self.home.broker}"\ntimeout_ms = 30000\n'
            '[loop]\nmax_rounds = 4\n'
            f'tools = ["{"read_file" if self.podman else "echo"}", "list_dir"]\n')
        self.inferproxy = Daemon([str(VENV_BIN / "inferproxy"), "serve", "--config",
                                  str(infer_config)], self.root, "inferproxy")
        self.loopd = Daemon([str(VENV_BIN / "loopd"), "serve", "--config", str(loop_config)],
                            self.root, "loopd")

    def start_all(self) -> None:
        self.start_brokerd()
        self.start_llama()
        self.make_daemons()
        self.inferproxy.start()
        self.loopd.start()

    def stop_all(self) -> dict[str, int | None]:
        codes = {"loopd": self.loopd.stop(), "inferproxy": self.inferproxy.stop(),
                 "brokerd": self.stop_brokerd()}
        if self.llama is not None:
            self.llama.terminate()
            codes["llama"] = self.llama.wait(30)
            if self.llama.stdout is not None:
                self.llama.stdout.close()
        return codes

    # -- the audit file system ------------------------------------------------------------

    def fill_audit_fs(self) -> int:
        """Fill the tmpfs under the audit directory; the bytes written."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.auditfs / "filler", "wb", buffering=0) as handle:
            try:
                while written < 2 * AUDIT_FS_BYTES:
                    written += handle.write(chunk)
            except OSError:
                pass
        return written

    def empty_audit_fs(self) -> None:
        (self.auditfs / "filler").unlink(missing_ok=True)

    def cleanup(self) -> None:
        if self.keep and self.audit.is_dir():
            shutil.copytree(self.audit, self.root / "audit-kept")
        if self.audit_fs_mounted:
            subprocess.run(["umount", "-l", str(self.auditfs)], check=False, capture_output=True)
        if not self.keep:
            self.home.cleanup()
            shutil.rmtree(self.root, ignore_errors=True)
