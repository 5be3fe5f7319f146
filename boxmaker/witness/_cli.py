"""`boxmaker witness serve|key --config witness.toml` (10-checkpoints)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click
import trio

from .. import _trio_run
from .._error_table import condition, shown
from .._errors import ConfigError
from .._keyfile import KeyFileError, load_key
from .._sockets._sd import notify
from .._state_files import NotRegularFile
from ..proto.tlog import TYPE_COSIGNATURE_V1, Signer
from ._config import WitnessConfig, load_witness_config
from ._serve import serve
from ._store import StateDamaged

_CONFIG = click.option("--config", "config_path", type=click.Path(path_type=Path),
                       required=True, help="witness.toml")


def _fail(message: str) -> None:
    click.echo(f"boxmaker witness: {message}. See {condition('witness_start_failed')}",
               err=True)
    sys.exit(1)


def _load(config_path: Path) -> tuple[WitnessConfig, Signer]:
    try:
        config = load_witness_config(config_path)
    except ConfigError as exc:
        _fail(f"the config is not valid: {exc}")
        raise AssertionError from None  # pragma: no cover
    try:
        signer, created = load_key(config.key_file, config.name, TYPE_COSIGNATURE_V1,
                                   create=True)
    except (KeyFileError, OSError) as exc:
        _fail(f"the key file cannot be used: {exc}")
        raise AssertionError from None  # pragma: no cover
    if created:
        click.echo(f"boxmaker witness: created a new key in {config.key_file}", err=True)
    return config, signer


@click.group("witness")
def witness() -> None:
    """A witness for other machines' audit logs (C2SP tlog-witness)."""


@witness.command("serve")
@_CONFIG
def serve_command(config_path: Path) -> None:
    """Cosign the checkpoints of the configured logs; serve until stopped."""
    config, signer = _load(config_path)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="witness: %(levelname)s %(message)s")

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, config, signer)
            notify("READY=1")

    try:
        _trio_run.run(run)
    except StateDamaged as exc:
        _fail(f"the state is damaged ({exc}); refusing to start")
    except NotRegularFile as exc:
        _fail(shown(f"the state is damaged ({exc}); refusing to start", exc))
    except OSError as exc:
        _fail(f"cannot start: {exc.strerror or exc}")
    except KeyboardInterrupt:
        pass


@witness.command("key")
@_CONFIG
def key_command(config_path: Path) -> None:
    """Print the witness's verifier key (for brokerd.toml and `audit verify --witness-key`)."""
    _config, signer = _load(config_path)
    click.echo(signer.verifier.text())
