"""`loopd serve [--config PATH]`."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

import click
import trio

from .. import _trio_run
from .._errors import StartFailed
from .._sockets import _sd
from ..proto._escape import escape_text
from ._command import Failed, config_option, load_or_fail
from ._serve import serve


async def _serve_until_signal(config_path: Path | None) -> None:
    config = load_or_fail(config_path)
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            await nursery.start(lambda task_status: serve(config, task_status=task_status))
            logging.getLogger("boxmaker.loopd").info("loopd serving on %s", config.socket)
            async for signum in signals:
                logging.getLogger("boxmaker.loopd").info(
                    "loopd stopping (%s)", signal.Signals(signum).name)
                _sd.notify("STOPPING=1")
                nursery.cancel_scope.cancel()
                break


@click.command("serve")
@config_option
def serve_cmd(config_path: Path | None) -> None:
    """Run loopd: loop.sock for bxctl, the agent loop, the self-test at start."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s loopd %(levelname)s %(message)s")
    try:
        _trio_run.run(lambda: _serve_until_signal(config_path))
    except StartFailed as exc:
        raise Failed(escape_text(str(exc), keep_newlines=False)) from None
