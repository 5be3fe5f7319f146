"""`boxmaker approvals serve` (`python -m boxmaker.approvals serve`): the approval page
in the foreground.  The `boxmaker` command runs this module as a program, so the
page meets the other parts only over admin.sock."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import click
import trio

from .. import _trio_run
from .._errors import ConfigError
from .._qr import terminal_qr
from .._sockets._sd import notify
from ._config import load_config
from ._serve import Served, serve

LOOPBACK_NOTE = (
    "it listens on loopback only: a phone cannot reach it. To serve it to the phone, set "
    'listen = "0.0.0.0:8443" and origin = "https://NAME:8443" in approvals.toml (NAME: a DNS '
    "name the phone resolves, e.g. the tailnet's), put the same origin and rp_id = \"NAME\" in "
    "brokerd.toml's [approvals], and trust the CA on the phone (docs/approvals.md, "
    '"Serve it to your phone")')


def _loopback(bind: str) -> bool:
    host = bind.rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host.startswith("127.") or host == "::1"


def announce(served: Served, *, qr: bool) -> None:
    click.echo(f"approval page: {served.url}  (listening on {', '.join(served.binds)})")
    if served.binds and all(_loopback(b) for b in served.binds):
        click.echo(LOOPBACK_NOTE)
    if served.ca_cert is not None:
        click.echo(f"its certificate is signed by a local CA: install {served.ca_cert} on "
                   "your phone once (docs/approvals.md says how)")
    if qr:
        click.echo(terminal_qr(served.url))


def serve_page(config_path: Path | None, *, qr: bool) -> None:
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    logging.basicConfig(level=logging.INFO, format="approvals: %(message)s")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            served: Served = await nursery.start(serve, config)
            announce(served, qr=qr)
            notify("READY=1")
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    notify("STOPPING=1")
                    nursery.cancel_scope.cancel()
                    return

    try:
        _trio_run.run(main)
    except OSError as exc:
        raise click.ClickException(f"the approval page could not start: {exc}") from exc


@click.group()
def cli() -> None:
    """The approval page: approve pending calls from a phone, with a passkey."""


@cli.command("serve")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="approvals.toml (default: $BOXMAKER_HOME/approvals.toml).")
@click.option("--no-qr", is_flag=True, help="Print the URL without its QR code.")
def serve_command(config_path: Path | None, no_qr: bool) -> None:
    """Serve the approval page (a client of brokerd's admin.sock) until stopped."""
    serve_page(config_path, qr=not no_qr)


def main() -> None:
    cli(prog_name="boxmaker approvals")
