"""`bxctl grants replay` (07-bxctl "Grants against history"): offline, no daemon.

The log is read once: every line goes to the chain verifier, and each line the
verifier takes in goes on to the replay (`HistoryReader`), which re-decides
the call with `boxmaker.policy.decide` at the taint of its decision record.
What the replay finds is held in a temporary file until the verifier's report
is in; a log that does not verify is refused (exit 1) and nothing of it is
shown.  Memory stays bounded by the decision cache, not by the log.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, NoReturn

import click

from .._audit_files import log_size, verify_directory
from .._error_table import condition
from .._errors import ConfigError
from ..policy._decision import ProtectedPaths
from ..policy._explain import report_lines as grants_report_lines
from ..policy._model import GrantSet, InvalidGrantSet
from ..policy._replay import Redecided, Redecider, ReplayTally, change_json, change_line
from ..proto._convert import unstructure
from ..proto._escape import escape_line
from ..proto._json import dumps
from ..proto.audit import ChainReport, HistoryCall, HistoryReader, OnApproval, OnCall, OnLine
from ._app import App, pass_app
from ._audit_cmd import PROGRESS_MIN_BYTES, NotFine, _parse_since
from ._grants_cmd import _load, brokerd_protected_paths, grants
from ._replay_pool import DecidePool, parallel_worth_it
from ._screen import terminal_width, wrap_line

CHAIN_RUNBOOK = condition("audit_chain_broken")


def protected_paths(brokerd_config: Path | None) -> ProtectedPaths:
    """brokerd's protected paths, by the very function `grants explain` uses.

    The one place replay and suggest take them from (so that it can be switched
    to a shared function in one place)."""
    try:
        return ProtectedPaths.of(brokerd_protected_paths(brokerd_config))
    except ConfigError as exc:
        raise click.UsageError(f"brokerd config: {exc}") from None


def _exit(code: int) -> NoReturn:
    click.get_current_context().exit(code)


def read_history(directory: Path, on_call: OnCall, on_approval: OnApproval | None = None,
                 *, label: str = "replaying") -> ChainReport:
    """Verify the log in `directory`, feeding each verified line to the history reader.

    A progress bar on stderr for a big log when stderr is a terminal.  Raises NotFine
    when the directory cannot be read."""
    return verify_lines(directory, HistoryReader(on_call, on_approval).feed, label=label)


def verify_lines(directory: Path, on_line: OnLine, *, label: str = "replaying") -> ChainReport:
    """Verify the log in `directory`, feeding each line taken into the chain to `on_line`.

    A progress bar on stderr for a big log when stderr is a terminal.  Raises NotFine
    when the directory cannot be read."""
    try:
        size = log_size(directory) if sys.stderr.isatty() else 0
        if size < PROGRESS_MIN_BYTES:
            return verify_directory(directory, on_line=on_line)
        with click.progressbar(length=size, label=label, file=sys.stderr) as bar:
            return verify_directory(directory, on_line=on_line, progress=bar.update)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise NotFine(f"cannot read the audit log in {escape_line(os.fsdecode(directory))}: "
                      f"{escape_line(reason)}") from exc


def refuse_unverified(report: ChainReport) -> str:
    """The message for a log that does not verify (nothing of it is used)."""
    failed = report.unaccepted
    first = failed[0]
    where = "the end of the log" if first.file is None else (
        f"{escape_line(first.file)} line {first.line}")
    count = len(failed)
    return (f"bxctl: the audit log does not verify ({count} failure{'s' if count != 1 else ''}, "
            f"the first: {first.kind} at {where}); nothing was replayed. "
            f"`bxctl audit verify` lists them. See {CHAIN_RUNBOOK}")


def since_filter(since: str | None) -> Callable[[HistoryCall], bool]:
    since_ts = _parse_since(since)
    if since_ts is None:
        return lambda call: True
    return lambda call: call.ts >= since_ts


def load_valid_grants(where: Path, as_json: bool) -> GrantSet:
    """The grant set in `where`; an invalid one is reported and exits 1."""
    state = _load(where)
    if isinstance(state, InvalidGrantSet):
        if as_json:
            click.echo(dumps(unstructure(state.report), ascii_only=True))
        else:
            width = terminal_width()
            for line in grants_report_lines(state.report, os.fsdecode(where)):
                click.echo(wrap_line(line, width))
            click.echo("bxctl: the grant set is invalid: every call would be denied; "
                       "nothing was replayed", err=True)
        _exit(1)
    return state


def _emit_json(tally: ReplayTally, spool: IO[str], verified: bool) -> None:
    head = dumps({"verified": verified, "calls": tally.calls, "matrix": tally.matrix_json()},
                 ascii_only=True)
    click.echo(head[:-1] + ',"changes":[', nl=False)
    spool.seek(0)
    first = True
    for line in spool:
        click.echo(("" if first else ",") + line.rstrip("\n"), nl=False)
        first = False
    click.echo("]}")


def _emit_text(tally: ReplayTally, spool: IO[str]) -> None:
    spool.seek(0)
    width = terminal_width()
    for line in spool:  # escaped change lines: wrapped behind the gutter
        click.echo(wrap_line(line.rstrip("\n"), width))
    click.echo(f"was -> now ({tally.calls} call{'s' if tally.calls != 1 else ''}):")
    for line in tally.matrix_lines():
        click.echo(line)
    if tally.widening:
        click.echo(f"not ok: {tally.widening} of {tally.changes} changed calls were denied or "
                   "asked and would now be allowed")
    else:
        click.echo(f"ok: {tally.changes} changed call{'s' if tally.changes != 1 else ''}; "
                   "none that was denied or asked would now be allowed")


def _replay_log(audit: Path, grant_set: GrantSet, protected: ProtectedPaths,
                keep: Callable[[HistoryCall], bool] | None, tally: ReplayTally) -> ChainReport:
    """Read, verify and re-decide into `tally` the calls `keep` takes (None: every call):
    on a second core for a big log (`_replay_pool`)."""
    try:
        size = log_size(audit)
    except OSError:
        size = 0  # read_history says why
    if not parallel_worth_it(size):
        redecide: Callable[[HistoryCall], Redecided] = Redecider(grant_set, protected)

        def on_call(call: HistoryCall) -> None:
            if keep is None or keep(call):
                tally.add(call, redecide(call))

        return read_history(audit, on_call)
    pool = DecidePool(grant_set, protected, keep, tally)
    try:
        report = verify_lines(audit, pool.on_line)
        pool.finish()
        return report
    finally:
        pool.close()


@grants.command("replay")
@click.option("--grants", "grants_dir", type=click.Path(path_type=Path), default=None,
              help="The grant set to replay with (default: the configured grants).")
@click.option("--audit", "audit_dir", type=click.Path(path_type=Path), default=None,
              help="The audit directory (default: the configured one).")
@click.option("--since", metavar="DATE", help="Only calls at or after DATE (UTC).")
@click.option("--brokerd-config", type=click.Path(path_type=Path), default=None,
              help="brokerd.toml, for the protected paths (default: $BOXMAKER_HOME/brokerd.toml).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_app
def replay(app: App, grants_dir: Path | None, audit_dir: Path | None, since: str | None,
           brokerd_config: Path | None, as_json: bool) -> None:
    """Re-decide every recorded call with a grant set; show what would change.

    The log is verified first (one that does not verify is refused).  Exit 0 when
    nothing that was denied or asked would now be allowed, else 1.
    """
    keep = None if since is None else since_filter(since)
    protected = protected_paths(brokerd_config)
    grant_set = load_valid_grants(grants_dir if grants_dir is not None else app.config.grants,
                                  as_json)
    audit = audit_dir if audit_dir is not None else app.config.audit
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        tally = ReplayTally(on_change=lambda change: spool.write(
            (dumps(change_json(change), ascii_only=True) if as_json else change_line(change))
            + "\n"))
        report = _replay_log(audit, grant_set, protected, keep, tally)
        if not report.ok:
            if as_json:
                click.echo(dumps({"verified": False, "calls": 0, "matrix": {}, "changes": []}))
            click.echo(refuse_unverified(report), err=True)
            _exit(1)
        if as_json:
            _emit_json(tally, spool, True)
        else:
            _emit_text(tally, spool)
    _exit(1 if tally.widening else 0)
