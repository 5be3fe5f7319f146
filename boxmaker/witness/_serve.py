"""The witness's HTTP server: a thin trio layer over `_logic.decide`.

``POST /add-checkpoint`` (C2SP tlog-witness), ``GET /latest/<origin,
url-escaped>`` (10-checkpoints) and C2SP's ``GET /<sha256(origin) hex>/checkpoint``.
Check-and-save runs under one lock: the decision, the durable save and the
update of the in-memory state happen with no other request in between, and
the answer goes out only after the save returned, so neither a crash nor two
concurrent requests can make it cosign a rollback or a fork.
"""

from __future__ import annotations

import logging
import os
import re
import time
from urllib.parse import unquote

import trio

from .._http._http11 import HttpRequest, HttpResponse, serve_tcp
from ..proto.tlog import Signer
from ._config import WitnessConfig
from ._logic import TEXT_CONTENT_TYPE, Cosigned, decide
from ._store import load_state, save_state, state_name

log = logging.getLogger("boxmaker.witness")

TEST_AFTER_SAVE_FIFO = "BOXMAKER_WITNESS_TEST_AFTER_SAVE_FIFO"
"""Fault injection for the crash tests: after a save, write to this FIFO and
hang (the test then kills the process with SIGKILL before the answer)."""

_ORIGIN_HASH = re.compile(r"/([0-9a-f]{64})/checkpoint")


class Witness:
    """The state and the lock; `handle` answers one request."""

    def __init__(self, config: WitnessConfig, signer: Signer,
                 state: dict[str, Cosigned]) -> None:
        self.config = config
        self.signer = signer
        self.state = state
        self.lock = trio.Lock()

    async def handle(self, request: HttpRequest) -> HttpResponse:
        if request.target == "/add-checkpoint":
            if request.method != "POST":
                return HttpResponse(status=405, body=b"POST only\n")
            return await self._add_checkpoint(request.body)
        if request.method != "GET":
            return HttpResponse(status=405, body=b"GET only\n")
        if request.target.startswith("/latest/"):
            try:
                origin = unquote(request.target[len("/latest/"):], errors="strict")
            except UnicodeDecodeError:
                return HttpResponse(status=400, body=b"the origin is not UTF-8\n")
            cosigned = self.state.get(origin)
        elif (match := _ORIGIN_HASH.fullmatch(request.target)) is not None:
            found = [c for o, c in self.state.items() if state_name(o)[:64] == match.group(1)]
            cosigned = found[0] if found else None
        else:
            return HttpResponse(status=404, body=b"not found\n")
        if cosigned is None:
            return HttpResponse(status=404, body=b"no checkpoint cosigned for that origin\n")
        return HttpResponse(status=200, body=cosigned.note, content_type=TEXT_CONTENT_TYPE)

    async def _add_checkpoint(self, body: bytes) -> HttpResponse:
        async with self.lock:
            outcome = decide(body, logs=self.config.logs, state=self.state,
                             signer=self.signer, now=int(time.time()))
            if outcome.save is not None:
                try:
                    await trio.to_thread.run_sync(save_state, self.config.state, outcome.save)
                except OSError as exc:
                    log.error("cannot save the state of %r: %s; not cosigned",
                              outcome.save.checkpoint.origin, exc.strerror or exc)
                    return HttpResponse(status=500, body=b"cannot save the state\n")
                self.state[outcome.save.checkpoint.origin] = outcome.save
                log.info("cosigned %s at size %d", outcome.save.checkpoint.origin,
                         outcome.save.checkpoint.size)
                await _after_save_hook()
        return HttpResponse(status=outcome.status, body=outcome.body,
                            content_type=outcome.content_type)


async def _after_save_hook() -> None:
    fifo = os.environ.get(TEST_AFTER_SAVE_FIFO)
    if not fifo:
        return
    def tell() -> None:
        with open(fifo, "wb") as stream:
            stream.write(b"saved\n")
    await trio.to_thread.run_sync(tell)
    await trio.sleep_forever()


async def serve(config: WitnessConfig, signer: Signer, *,
                task_status: trio.TaskStatus[list[trio.SocketListener]]
                = trio.TASK_STATUS_IGNORED) -> None:
    """Load the state (StateDamaged, OSError refuse the start) and serve."""
    state = load_state(config.state, signer.verifier)
    witness = Witness(config, signer, state)
    log.info("witness %s: %d logs configured, %d with a cosigned checkpoint; listening on "
             "%s:%d", config.name, len(config.logs), len(state), config.host, config.port)
    await serve_tcp(witness.handle, config.host, config.port, task_status=task_status)
