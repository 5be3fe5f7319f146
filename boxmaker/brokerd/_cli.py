"""The `brokerd` command line (05-brokerd "Command line").

    brokerd serve [--config PATH] [--accept-break]
    brokerd check-config [--config PATH]
    brokerd rebuild-state [--config PATH]

Arguments are OS strings: a path that is not UTF-8 still works as a path.
Every refusal ends with its runbook pointer; exit 1.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from .. import __version__, _trio_run
from .._brokerd_config import BrokerdConfig, load_config
from .._error_table import see, shown
from .._errors import ConfigError, StartFailed
from .._sockets._unix import ListenerLost
from ..proto._escape import escape_line
from ._serve import serve
from ._startup import runner_settings_problem
from ._state import sync_state_files
from .log._audit_link import rebuild_from_log
from .log._audit_writer import AuditError, AuditLocked, lock_audit_dir, open_audit_dir
from .log._checkpoints_link import CheckpointKeyProblem

_CONFIG_OPTION = click.option(
    "--config", "config_path", type=click.Path(path_type=Path), default=None,
    help="brokerd.toml (default: $BOXMAKER_HOME/brokerd.toml).",
)


def _fail(message: str) -> None:
    click.echo(message, err=True)
    sys.exit(1)


def _load(config_path: Path | None) -> BrokerdConfig:
    try:
        return load_config(config_path)
    except ConfigError as exc:
        _fail(f"brokerd: the config is not valid: {exc}; refusing to start. {see(exc)}")
    raise AssertionError("unreachable")  # pragma: no cover


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="brokerd: %(levelname)s %(message)s")


@click.group()
@click.version_option(__version__, prog_name="brokerd")
def cli() -> None:
    """brokerd: decides every tool call, records it, holds approvals, runs allowed tools."""


@cli.command("serve")
@_CONFIG_OPTION
@click.option("--accept-break", is_flag=True,
              help="Record a break over the audit log's failures and serve anyway.")
@click.option("--new-checkpoint-key", is_flag=True,
              help="Make a new checkpoint key although the log is not empty (the old one "
                   "is lost; witnesses must be given the new key).")
def serve_command(config_path: Path | None, accept_break: bool,
                  new_checkpoint_key: bool) -> None:
    """Serve broker.sock and admin.sock until SIGTERM or SIGINT."""
    config = _load(config_path)
    _setup_logging()
    try:
        _trio_run.run(lambda: serve(config, accept_break=accept_break, handle_signals=True,
                               new_checkpoint_key=new_checkpoint_key))
    except CheckpointKeyProblem as exc:
        _fail(shown(str(exc), exc))
    except AuditError as exc:
        _fail(shown(str(exc), exc))
    except StartFailed as exc:
        _fail(f"brokerd: cannot start: {exc}. {see(exc)}")
    except ListenerLost as exc:
        _fail(f"brokerd: {exc}; stopped. {see(exc)}")
    except OSError as exc:
        _fail(f"brokerd: cannot start: {exc.strerror or exc}. "
              f"{see(StartFailed, shown_by='brokerd')}")


@cli.command("check-config")
@_CONFIG_OPTION
def check_config_command(config_path: Path | None) -> None:
    """Check brokerd.toml and print the settings it resolves to."""
    config = _load(config_path)
    def shown(path: Path) -> str:
        return escape_line(os.fsdecode(path))

    source = shown(config.source) if config.source else "(none: every default)"
    lines = [
        f"config        {source}",
        f"home          {shown(config.home)}",
        f"grants        {shown(config.grants)}",
        f"audit         {shown(config.audit)}",
        f"state         {shown(config.state)}",
        f"broker.sock   {shown(config.broker_socket)}",
        f"admin.sock    {shown(config.admin_socket)}",
        f"broker_uids   {', '.join(str(u) for u in config.broker_uids)}",
        f"owner_uid     {config.owner_uid}",
        f"ttl_ms        {config.ttl_ms}",
        f"runner        {config.runner.kind}",
        f"run queue     {config.max_concurrent} at once, {config.max_queued} waiting at most "
        f"{config.queue_timeout_ms} ms",
        f"bounds        {config.max_connections} connections per socket, "
        f"arguments up to {config.max_args_bytes} bytes",
        f"fsync         {'on' if config.fsync else 'OFF (tests and benchmarks only)'}",
        f"protected     {escape_line(', '.join(config.protected))}",
        f"checkpoints   {escape_line(config.checkpoints.origin)} · every "
        f"{config.checkpoints.interval_ms} ms · {len(config.checkpoints.witnesses)} witness(es)",
    ]
    lines += [f"witness       {escape_line(w.key.name)} {escape_line(w.url)}"
              for w in config.checkpoints.witnesses]
    click.echo("\n".join(lines))
    problem = runner_settings_problem(config)
    if problem is not None:
        _fail(f"brokerd: the config is not valid: {problem}; refusing to start. "
              f"{see(ConfigError, shown_by='brokerd')}")
    if config.single_uid:
        click.echo("warning: one uid may both call tools and approve them (see deploy/)")
    click.echo("ok: the config is valid")


@cli.command("rebuild-state")
@_CONFIG_OPTION
def rebuild_state_command(config_path: Path | None) -> None:
    """Recompute every session's taint from the audit log and rewrite the state files."""
    config = _load(config_path)
    try:
        dir_fd = open_audit_dir(config.audit)
        try:
            lock_fd = lock_audit_dir(dir_fd)
        finally:
            os.close(dir_fd)
    except AuditLocked:
        _fail("brokerd: brokerd is running on this audit log and keeps the state files itself; "
              f"stop it first. {see(AuditLocked)}")
        return
    except AuditError as exc:
        _fail(shown(str(exc), exc))
        return
    try:
        taints, _, head = rebuild_from_log(config.audit)
        report = sync_state_files(config.sessions_dir, taints, head_seq=head, fsync=True)
    finally:
        os.close(lock_fd)
    for session in report.rewritten:
        click.echo(f"rewritten: {session}")
    for failure in report.failed:
        click.echo(f"not written: {failure}", err=True)
    click.echo(f"ok: {len(taints)} sessions in the log, {len(report.rewritten)} files rewritten")
    if report.failed:
        sys.exit(1)


def main() -> None:
    cli()
