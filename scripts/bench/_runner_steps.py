"""`brokerd` with clocks around the steps of one run_command call (`runner --steps`).

Run as ``python scripts/bench/_runner_steps.py serve --config C``: wraps the real
functions (nothing copied) and appends ``[call, step, perf_counter]`` lines to the
file named by ``BX_BENCH_STEPS`` (perf_counter is CLOCK_MONOTONIC on Linux: the
bench reads it on the same clock).  ``BX_BENCH_KEEP_RM=1``: the runtime's removals
never have room, so each call runs ``podman run --rm`` and waits for it (the
behaviour before removal after the answer), for a comparison in the same run.

Steps: ``request`` (the frame decoded), ``run`` / ``ran`` (the runtime's run: after
the decision and its audit record with fsync), ``planned`` (the host walk),
``argv`` (the podman argument list built), ``podman`` (podman started),
``hook`` / ``checked`` (the createRuntime hook's state in, the inode check done),
``exited`` (podman's exit, the output in), ``rm`` / ``rmd`` (a removal before the
answer), ``settled`` (the result record with fsync), ``answered`` (the frame sent),
``later`` / ``gone`` (the removal behind the answer).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from boxmaker.brokerd import _broker, _cli, _serve
from boxmaker.brokerd._ledger import Ledger
from boxmaker.brokerd.runner import (
    _command_run,
    _commands_runtime,
    _hook_gate,
    _removals,
    _runtimes,
)

OUT = os.environ["BX_BENCH_STEPS"]
_call = [0]


def mark(step: str) -> None:
    with open(OUT, "a", encoding="utf-8") as out:
        out.write(json.dumps([_call[0], step, time.perf_counter()]) + "\n")


def around(owner: Any, name: str, before: str | None, after: str | None) -> None:
    real: Callable[..., Awaitable[Any]] = getattr(owner, name)

    @functools.wraps(real)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        if before:
            mark(before)
        try:
            return await real(*args, **kwargs)
        finally:
            if after:
                mark(after)

    setattr(owner, name, timed)


def after_sync(owner: Any, name: str, step: str) -> None:
    real: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(real)
    def timed(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        finally:
            mark(step)

    setattr(owner, name, timed)


def install() -> None:
    real_handle = _serve.handle_broker

    async def handle(stream: Any, peer: Any, daemon: Any, request: Any) -> None:
        _call[0] = getattr(request, "id", 0) or 0
        mark("request")
        await real_handle(stream, peer, daemon, request)

    _serve.handle_broker = handle  # type: ignore[assignment]
    around(_runtimes.Runtimes, "run", "run", "ran")
    after_sync(_commands_runtime, "plan_command_call", "planned")
    after_sync(_command_run, "build_command_run_argv", "argv")
    around(_command_run, "capture", "podman", "exited")
    real_check = _hook_gate.Gate._check

    def check(self: Any, pid: int, state: dict[str, Any]) -> None:
        mark("hook")
        real_check(self, pid, state)

    _hook_gate.Gate._check = check  # type: ignore[method-assign]
    after_sync(_hook_gate.Gate, "_check", "checked")
    around(_command_run, "remove_container", "rm", "rmd")
    around(_removals, "remove_container", "later", "gone")
    around(Ledger, "settle", None, "settled")
    around(_broker, "send_answer", None, "answered")
    if os.environ.get("BX_BENCH_KEEP_RM") == "1":
        _removals.Removals.room = property(lambda self: False)  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    install()
    sys.argv[0] = "brokerd"
    _cli.main()
