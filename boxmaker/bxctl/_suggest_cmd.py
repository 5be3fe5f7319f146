"""`bxctl grants suggest` (07-bxctl "Grants against history"): offline, no daemon.

Pass 1 reads (and verifies) the log and gathers what the calls asked for and
how the owner answered; then the draft is replayed against the log (each pass
verifies again) until it changes exactly the calls it names (policy._suggest).
The draft goes to stdout or `--out FILE`, never into the grants directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

import click

from ..policy._replay import Redecider
from ..policy._suggest import (
    Candidate,
    SuggestCheck,
    SuggestGather,
    assign_ids,
    draft_state,
    render_draft,
)
from ..proto._escape import escape_line
from ..proto.audit import HistoryCall
from ._app import App, pass_app
from ._grants_cmd import grants
from ._replay_cmd import (
    load_valid_grants,
    protected_paths,
    read_history,
    refuse_unverified,
    since_filter,
)
from ._screen import terminal_width, wrap_line

MAX_PASSES: Final = 8
"""Replays of the draft; each narrows or drops what went too far."""


def _inside(path: Path, directory: Path) -> bool:
    target = os.path.realpath(path)
    base = os.path.realpath(directory)
    return target == base or target.startswith(base.rstrip("/") + "/")


def _refuse(message: str) -> None:
    click.echo(wrap_line(message, terminal_width()), err=True)
    click.get_current_context().exit(1)


def _for_stdout(draft: str) -> str:
    """The draft as TOML for a file or a pipe; on a terminal, every line wrapped by
    bxctl behind the gutter, as chat's (issue 22 item 16: a long path must not
    let the terminal wrap a row to column 0).  `--out` writes the TOML itself."""
    if not sys.stdout.isatty():
        return draft
    width = terminal_width()
    return "".join(wrap_line(line, width) + "\n" for line in draft.splitlines())


@grants.command("suggest")
@click.option("--audit", "audit_dir", type=click.Path(path_type=Path), default=None,
              help="The audit directory (default: the configured one).")
@click.option("--since", metavar="DATE", help="Only calls at or after DATE (UTC).")
@click.option("--min-approvals", type=click.IntRange(min=1), default=3, show_default=True,
              help="Approvals of an ask grant (and no refusal) before it is suggested as allow.")
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the draft to FILE (not inside the grants directory).")
@click.option("--grants", "grants_dir", type=click.Path(path_type=Path), default=None,
              help="The grants in force (default: the configured grants).")
@click.option("--brokerd-config", type=click.Path(path_type=Path), default=None,
              help="brokerd.toml, for the protected paths (default: $BOXMAKER_HOME/brokerd.toml).")
@pass_app
def suggest(app: App, audit_dir: Path | None, since: str | None, min_approvals: int,
            out: Path | None, grants_dir: Path | None, brokerd_config: Path | None) -> None:
    """Draft grants from the log: ask grants for what was denied no_grant, and allow
    grants to replace ask grants the owner keeps approving.

    Prints commented TOML that `bxctl grants check` accepts; nothing takes effect
    until you copy it into the grants directory.
    """
    where = grants_dir if grants_dir is not None else app.config.grants
    if out is not None and any(_inside(out, d) for d in (where, app.config.grants)):
        raise click.UsageError("--out is inside the grants directory: suggest never writes "
                               "there by itself; write the draft elsewhere and review it")
    keep = since_filter(since)
    protected = protected_paths(brokerd_config)
    grant_set = load_valid_grants(where, False)
    audit = audit_dir if audit_dir is not None else app.config.audit
    current = Redecider(grant_set, protected)
    gather = SuggestGather(grant_set, protected, min_approvals)
    window = 0

    def gathered(call: HistoryCall) -> None:
        nonlocal window
        inside = keep(call)
        window += inside
        gather.on_call(call, current(call), inside)

    report = read_history(audit, gathered, gather.on_approval, label="reading")
    if not report.ok:
        _refuse(refuse_unverified(report).replace("nothing was replayed", "nothing suggested"))
    candidates: list[Candidate] = gather.candidates()
    for _ in range(MAX_PASSES):
        if not candidates:
            break
        draft = Redecider(draft_state(grant_set, render_draft(candidates, [],
                                                              with_comments=False)), protected)
        check = SuggestCheck(candidates, current, draft)

        def checked(call: HistoryCall, check: SuggestCheck = check) -> None:
            if keep(call):
                check.on_call(call)

        report = read_history(audit, checked, label="checking")
        if not report.ok:
            _refuse(refuse_unverified(report).replace("nothing was replayed", "nothing suggested"))
        revised = check.revise()
        if revised is None:
            break
        candidates = revised
        assign_ids(candidates, grant_set)
    else:
        candidates = []
    span = f"since {since}" if since is not None else "in the log"
    header = [
        f"bxctl grants suggest: a draft from {window} call{'s' if window != 1 else ''} {span} "
        f"({escape_line(os.fsdecode(audit))}), {len(candidates)} "
        f"suggestion{'s' if len(candidates) != 1 else ''}.",
        "Nothing here is in force. Review it, copy it into the grants directory (taking out",
        "each grant it replaces), and check it with `bxctl grants check` and",
        "`bxctl grants replay` before brokerd reads it.",
    ]
    if gather.left_out:
        header.append(f"{gather.left_out} paths or hosts were left out (too many distinct ones); "
                      "run again with --since for a shorter window.")
    text = render_draft(candidates, header)
    draft_state(grant_set, text)  # the commented draft parses to the same grants
    if out is None:
        click.echo(_for_stdout(text), nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        _refuse(f"bxctl: cannot write {escape_line(os.fsdecode(out))}: "
                f"{escape_line(exc.strerror or type(exc).__name__)}")
    click.echo(f"wrote {len(candidates)} suggestion{'s' if len(candidates) != 1 else ''} to "
               f"{escape_line(os.fsdecode(out))}")
