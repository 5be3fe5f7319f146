"""The real llama-server for the `llama`-marked tests.

`scripts/get-llama-server` builds it into ``${BOXMAKER_CACHE:-~/.cache/boxmaker}/llama/``,
with the embedded model that boxmaker/stack/_models.py names.
The `llama_server` fixture (one per test session) starts it on a free loopback
port with the flags `boxmaker up` uses (boxmaker/stack/_local.py: ``-c 8192
-np 2 --jinja --slots --slot-save-path DIR``, the ChatML template with tool
calls, and the model's own extra flags), with ``-t 2``.  It waits for
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

from boxmaker._http import Endpoint
from boxmaker._http.client import LlamaClient
from boxmaker.stack._local import CONTEXT, SLOTS, LocalModel

LOCAL = LocalModel.in_cache()
SERVER, MODEL, TEMPLATE = LOCAL.server, LOCAL.model, LOCAL.template
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
    if not LOCAL.ready:
        return (f"{SERVER}, {TEMPLATE} or {MODEL} (with its stamp) is missing: "
                "run scripts/get-llama-server (about 10 minutes)")
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
    argv = LOCAL.argv(port, slot_dir, threads=2)
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
