"""`bxctl audit verify --witness-key VKEY [--witness URL]` and `bxctl audit key`
(10-checkpoints "Verifying").

The checkpoints come from `audit/checkpoints/` and, with ``--witness``, from
that witness's ``GET /latest/<origin>``; the log's key from `checkpoint.pub`
in the home (brokerd's verifier key, whose name is the origin).  One pass
over the log feeds the chain verifier and the tree; `judge` (pure) gives the
verdict.  Everything shown that came from a file or a peer is escaped.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from .._audit_tree_scan import TreeFacts, verify_with_tree
from .._checkpoint_files import read_all
from .._error_table import shown
from .._errors import UnavailableError
from .._state_files import NotRegularFile, read_regular
from ..proto._escape import escape_line
from ..proto._grammar import GrammarError, Url, parse_endpoint_url
from ..proto.audit import ChainReport, OnRecord
from ..proto.tlog import (
    TYPE_COSIGNATURE_V1,
    TYPE_ED25519,
    Candidate,
    CheckpointFinding,
    NoteError,
    VerifierKey,
    judge,
    parse_signed_checkpoint,
    sizes_needed,
)
from ..proto.tlog import parse_verifier_key as parse_vkey

PUB_NAME = "checkpoint.pub"


class WitnessUnreachable(UnavailableError, click.ClickException):
    runbook = "docs/runbook.md#daemon-unreachable"
    exit_code = 3

    def format_message(self) -> str:
        return shown(self.message, self)


def parse_witness_key(text: str) -> VerifierKey:
    try:
        key = parse_vkey(text)
    except NoteError as exc:
        raise click.BadParameter(str(exc), param_hint="--witness-key") from exc
    if key.key_type != TYPE_COSIGNATURE_V1:
        raise click.BadParameter("a witness key is a cosignature/v1 (0x04) key, as "
                                 "`boxmaker witness key` prints it", param_hint="--witness-key")
    return key


def find_log_key(home: Path, directory: Path | None) -> tuple[VerifierKey | None, str]:
    """brokerd's verifier key from checkpoint.pub (the home's, else beside DIR)."""
    places = [home / PUB_NAME]
    if directory is not None:
        places.append(directory.parent / PUB_NAME)
    for path in places:
        try:
            text = read_regular(path, 4096).decode("ascii").strip()
        except FileNotFoundError:
            continue
        except NotRegularFile as exc:
            return None, shown(str(exc), exc)
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"{path} cannot be read ({exc})"
        try:
            key = parse_vkey(text)
        except NoteError as exc:
            return None, f"{path} is not a verifier key ({exc})"
        if key.key_type != TYPE_ED25519:
            return None, f"{path} is not a log's (0x01) key"
        return key, str(path)
    return None, f"no {PUB_NAME} in {home}"


def _fetch(url: Url, origin: str) -> bytes | None:
    import trio  # only to ask a witness: `bxctl audit verify` starts without them

    from .._http._http11 import HttpError, request

    async def get() -> bytes | None:
        answer = await request(url, "GET", "/latest/" + quote(origin, safe=""))
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise HttpError(f"the witness answered {answer.status}")
        return answer.body

    try:
        return trio.run(get)
    except (HttpError, trio.TooSlowError) as exc:
        raise WitnessUnreachable(
            f"the witness at {escape_line(str(url.host))}:{url.effective_port} could not be asked "
            f"for its latest checkpoint ({escape_line(str(exc) or 'no answer in time')}); nothing "
            "was checked") from exc


def gather(audit_dir: Path, origin: str, witness_url: str | None) -> list[Candidate]:
    out = []
    for name, data in read_all(audit_dir):
        try:
            out.append(Candidate(source=f"audit/checkpoints/{name}",
                                 signed=parse_signed_checkpoint(data)))
        except NoteError:
            continue
    if witness_url is not None:
        try:
            url = parse_endpoint_url(witness_url)
        except GrammarError as exc:
            raise click.BadParameter(str(exc), param_hint="--witness") from exc
        fetched = _fetch(url, origin)
        if fetched is not None:
            with contextlib.suppress(NoteError):
                out.append(Candidate(source=witness_url,
                                     signed=parse_signed_checkpoint(fetched)))
    return out


def check(
    audit_dir: Path, *, home: Path, explicit_dir: bool, witness_key: VerifierKey,
    witness_url: str | None, expect_head: tuple[int, str] | None,
    on_record: OnRecord | None = None,
) -> tuple[ChainReport, CheckpointFinding, TreeFacts]:
    """Raises OSError (the log cannot be read), WitnessUnreachable."""
    log_key, where = find_log_key(home, audit_dir if explicit_dir else None)
    try:
        candidates = gather(audit_dir, log_key.name if log_key else "", witness_url) \
            if log_key is not None else []
    except NotRegularFile as exc:
        raise click.ClickException(escape_line(shown(str(exc), exc))) from exc
    report, facts = verify_with_tree(audit_dir, sizes=sizes_needed(candidates),
                                     expect_head=expect_head, on_record=on_record)
    if log_key is None:
        finding = CheckpointFinding(verdict="no_checkpoint", size=None, root=None,
                                    witness=witness_key.name, source=None,
                                    detail=f"the log's key is unknown: {where}")
        return report, finding, facts
    resets = [p for p in (facts.position(b.file, b.line) for b in report.accepted_breaks)
              if p is not None]
    resets += [p + 1 for p in (facts.position(r.file, r.line) for r in report.recovered)
               if p is not None]
    finding = judge(candidates, log_key=log_key, witness=witness_key, log_size=facts.size,
                    log_roots=facts.roots, resets=sorted(resets))
    return report, finding, facts


def json_additions(document: dict[str, Any], report: ChainReport, finding: CheckpointFinding,
                   facts: TreeFacts) -> None:
    document["checkpoint"] = finding.json()
    if finding.verdict != "ok":
        document["ok"] = False
    size = finding.size or 0
    for item, brk in zip(document["accepted_breaks"], report.accepted_breaks, strict=True):
        position = facts.position(brk.file, brk.line)
        item["witnessed"] = position is not None and position <= size


def text_lines(report: ChainReport, finding: CheckpointFinding, facts: TreeFacts,
               witness_url: str | None) -> list[str]:
    out = []
    size = finding.size or 0
    for brk in report.accepted_breaks:
        position = facts.position(brk.file, brk.line)
        if position is not None and position > size:
            out.append(f"not witnessed: the break at {escape_line(brk.file)} line {brk.line}")
    where = "" if witness_url is not None else " (local checkpoints only)"
    label = "ok" if finding.verdict == "ok" else f"FAILED: {finding.verdict}"
    shown = "" if finding.size is None else f" at size {finding.size}"
    out.append(f"checkpoint {label}{shown}, witness {escape_line(finding.witness)}: "
               f"{escape_line(finding.detail)}{where}")
    return out


@click.command("key")
@click.pass_obj
def key(app: Any) -> None:
    """Print brokerd's checkpoint verifier key (checkpoint.pub) for witnesses."""
    log_key, where = find_log_key(app.config.home, None)
    if log_key is None:
        raise click.ClickException(f"{escape_line(where)}: brokerd makes it at its first start")
    click.echo(log_key.text())
