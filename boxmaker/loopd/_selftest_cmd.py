"""`loopd self-test`: check the inference server against loopd.toml (09-operations)."""

from __future__ import annotations

from pathlib import Path

import click
import trio

from .._error_table import shown
from .._http import InferenceError
from .._http.client import LlamaClient
from ._command import Failed, config_option, load_or_fail
from ._selftest import Expected, InferenceMismatch, self_test


@click.command("self-test")
@config_option
def self_test_cmd(config_path: Path | None) -> None:
    """Check the inference server against loopd.toml; print what was found; exit 0/1."""
    config = load_or_fail(config_path)
    inference = config.inference
    client = LlamaClient(inference.endpoint, timeouts=inference.timeouts)
    expected = Expected(slots=inference.slots, n_ctx_per_slot=inference.n_ctx_per_slot,
                        tools_offered=bool(config.tools))
    click.echo(f"inference server: {inference.endpoint}")
    click.echo(f"expecting: {inference.slots} slots, n_ctx {inference.n_ctx_per_slot} per slot,"
               f" tool calls {'required' if expected.tools_offered else 'not required'}")
    try:
        report = trio.run(
            lambda: self_test(client, expected, load_timeout_s=inference.load_timeout_s)
        )
    except (InferenceError, InferenceMismatch) as exc:
        raise Failed(f"self-test failed: {shown(exc.message, exc, joiner=' ')}") from exc
    for line in report.lines()[1:]:
        click.echo(line)
    click.echo("self-test passed")
