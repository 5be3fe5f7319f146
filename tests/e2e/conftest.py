"""The real llama-server for the `llama`-marked tests.

`scripts/get-llama-server` builds it into ``${BOXMAKER_CACHE:-~/.cache/boxmaker}/llama/``.
The `llama_server` fixture (one per test session) starts it on a free loopback
port with the flags of the captures in fixtures/llama-server/README.md
(``-c 8192 -np 2 -t 2 --jinja --slots --slot-save-path DIR`` and the Qwen 2.5
chat template, which supports tool calls) plus ``--swa-full``: Gemma 3 uses
sliding-window attention, and without a full-size cache a restored slot has
no context checkpoints, so the server re-processes the whole prompt
(``timings.cache_n`` 0) and restoring a slot buys nothing.  It waits for
``/health`` to answer 200, and stops the server at the end.  Without the
build the tests are skipped, saying why, unless ``BOXMAKER_CI=1``: in CI a
missing build is a failure.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from boxmaker.loopd._http import Endpoint
from boxmaker.loopd._llama import LlamaClient

CACHE = Path(os.environ.get("BOXMAKER_CACHE") or Path.home() / ".cache" / "boxmaker") / "llama"
SERVER = CACHE / "bin" / "llama-server"
MODEL = CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"
TEMPLATE = CACHE / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
CONTEXT = 8192
SLOTS = 2
START_TIMEOUT_S = 180.0


@attrs.frozen
class LlamaServer:
    host: str
    port: int
    slot_dir: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint.tcp(self.host, self.port)

    @property
    def n_ctx_per_slot(self) -> int:
        return CONTEXT // SLOTS

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


async def wait_slot_idle(llama: LlamaClient, slot: int, within_s: float) -> None:
    """Poll ``/slots`` until `slot` stops processing (a real server: nothing to wait on)."""
    with trio.fail_after(within_s):
        while any(s.id == slot and s.is_processing for s in await llama.slots()):
            await trio.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _health(port: int) -> int | None:
    """The status of one GET /health, None when nothing answers yet."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def _missing() -> str | None:
    for path in (SERVER, MODEL, TEMPLATE):
        if not path.exists():
            return f"{path} is missing: run scripts/get-llama-server (about 10 minutes)"
    return None


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    missing = _missing()
    if missing is not None:
        if os.environ.get("BOXMAKER_CI") == "1":
            pytest.fail(f"BOXMAKER_CI=1 and the real llama-server is not built: {missing}")
        pytest.skip(missing)
    work = Path(tempfile.mkdtemp(prefix="bxllama"))
    slot_dir = work / "slots"
    slot_dir.mkdir()
    log = work / "llama-server.log"
    port = _free_port()
    server = LlamaServer(host="127.0.0.1", port=port, slot_dir=slot_dir, log=log)
    argv = [str(SERVER), "-m", str(MODEL), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(CONTEXT), "-np", str(SLOTS), "-t", "2", "--jinja", "--slots", "--swa-full",
            "--slot-save-path", str(slot_dir), "--chat-template-file", str(TEMPLATE)]
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                stderr=subprocess.STDOUT)
    try:
        # A real process loading a model: nothing to wait on but its answers.
        deadline = time.monotonic() + START_TIMEOUT_S
        while _health(port) != 200:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited with {proc.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server not healthy after {START_TIMEOUT_S} s:\n"
                            f"{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
