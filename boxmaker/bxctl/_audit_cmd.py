"""`bxctl audit verify|head|show`: the audit log, read from its files directly.

No daemon is needed.  Everything shown from the log (file names, sessions,
tool names, reasons, failure details) goes through `escape_line`.
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import click

from .._audit_files import iter_lines, list_log_files, log_size, verify_directory
from .._error_table import condition
from .._errors import DamagedError
from ..proto._convert import unstructure
from ..proto._errors import DecodeError
from ..proto._escape import escape_line
from ..proto._json import dumps, dumps_terminal
from ..proto.audit import (
    AcceptedBreak,
    ChainReport,
    OnBlock,
    OnLine,
    OnRecord,
    Record,
    event_key,
    parse_record,
)
from ..proto.tlog import VerifierKey
from ..proto.wire import format_ts
from ._app import App, pass_app
from ._audit_assertions import KeptAssertions
from ._audit_assertions import as_json as assertions_json
from ._audit_assertions import report_lines as assertion_lines
from ._audit_checkpoint import check as check_checkpoint
from ._audit_checkpoint import json_additions, parse_witness_key
from ._audit_checkpoint import key as key_command
from ._audit_checkpoint import text_lines as checkpoint_lines
from ._screen import terminal_width, wrap_line

PROGRESS_MIN_BYTES = 64 * 1024 * 1024
"""Logs at least this big show a progress bar (when stderr is a terminal)."""

_EXPECT_HEAD = re.compile(r"(0|[1-9][0-9]{0,19}):([0-9a-f]{64})")
_SESSION = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_U64_MAX = 2**64 - 1


@click.group()
def audit() -> None:
    """Verify and read the audit log, with no daemon needed."""


def _directory(app: App, directory: Path | None) -> Path:
    return directory if directory is not None else app.config.audit


class NotFine(DamagedError, click.ClickException):
    """The thing checked is not fine (exit 1, 07-bxctl)."""

    exit_code = 1


def _unreadable(directory: Path, exc: OSError) -> NotFine:
    reason = exc.strerror or type(exc).__name__
    return NotFine(
        f"cannot read the audit log in {escape_line(str(directory))}: {escape_line(reason)}"
    )


def _parse_expect_head(value: str | None) -> tuple[int, str] | None:
    if value is None:
        return None
    match = _EXPECT_HEAD.fullmatch(value)
    if match is None or int(match.group(1)) > _U64_MAX:
        raise click.BadParameter(
            "expected SEQ:HASH, a decimal seq and 64 lowercase hex digits "
            "(as `bxctl audit head` prints it)",
            param_hint="--expect-head",
        )
    return int(match.group(1)), match.group(2)


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def _verify(directory: Path, expect_head: tuple[int, str] | None,
            on_record: OnRecord | None = None, on_line: OnLine | None = None,
            on_block: OnBlock | None = None) -> ChainReport:
    """Verify, with a progress bar on a terminal for a big log.  Raises OSError."""
    size = log_size(directory) if _stderr_is_terminal() else 0
    if size < PROGRESS_MIN_BYTES:
        return verify_directory(directory, expect_head=expect_head, on_record=on_record,
                                on_line=on_line, on_block=on_block)
    with click.progressbar(length=size, label="verifying", file=sys.stderr) as bar:
        return verify_directory(directory, expect_head=expect_head, on_record=on_record,
                                on_line=on_line, on_block=on_block, progress=bar.update)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _where(file: str | None, line: int | None, seq: int | None) -> str:
    if file is None:
        return "the end of the log"
    text = f"{escape_line(file)} line {line}"
    return text if seq is None else f"{text} (seq {seq})"


SUMMARY_BREAKS: Final = 5
"""Accepted breaks named on the summary line (then "and N more")."""


def _ok_word(breaks: list[AcceptedBreak]) -> str:
    """`ok`, or `ok, with N accepted breaks at FILE:LINE, ...` (issue 22 item 14)."""
    if not breaks:
        return "ok"
    where = ", ".join(f"{escape_line(b.file)}:{b.line}" for b in breaks[:SUMMARY_BREAKS])
    if len(breaks) > SUMMARY_BREAKS:
        where += f" and {len(breaks) - SUMMARY_BREAKS} more"
    return f"ok, with {_plural(len(breaks), 'accepted break')} at {where}"


def report_lines(report: ChainReport) -> list[str]:
    """The text form of a report: one line per finding, then the summary."""
    out: list[str] = []
    for name in report.ignored_files:
        out.append(f"ignored: {escape_line(name)} (not a day file)")
    for item in report.recovered:
        out.append(f"recovered: {escape_line(item.file)} line {item.line} "
                   "(a torn line closed off by a recovery record)")
    for brk in report.accepted_breaks:
        out.append(f"break: {escape_line(brk.file)} line {brk.line} accepts "
                   f"{_plural(brk.failures, 'failure')} from {escape_line(brk.first.file)} "
                   f"line {brk.first.line} ({brk.first.kind})")
    for call in report.unfinished_calls:
        out.append(f"unfinished: call {call} has no result")
    torn = report.torn_tail
    if torn is not None:
        out.append(f"torn tail: {escape_line(torn.file)} line {torn.line} "
                   f"({_plural(torn.bytes, 'byte')}), brokerd will recover it at start")
    for failure in report.failures:
        label = "accepted" if failure.accepted else "FAILED"
        out.append(f"{label}: {failure.kind} at "
                   f"{_where(failure.file, failure.line, failure.seq)}: "
                   f"{escape_line(failure.detail)}")
    if report.ok:
        head = report.head
        ok = _ok_word(report.accepted_breaks)
        if head is None:
            out.append(f"{ok}: 0 records in {_plural(report.files, 'file')}, no head yet")
        else:
            out.append(f"{ok}: {report.records} records in {_plural(report.files, 'file')}, "
                       f"head {head.seq} {head.hash[:6]}...")
    else:
        failed = report.unaccepted
        regions = len({f.region for f in failed})
        out.append(f"not ok: {_plural(len(failed), 'failure')} in "
                   f"{_plural(regions, 'region')}; see {condition('audit_chain_broken')}")
    return out


@audit.command()
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the ChainReport as JSON.")
@click.option("--expect-head", metavar="SEQ:HASH",
              help="A head saved earlier with `bxctl audit head`; it must still be there.")
@click.option("--witness-key", metavar="VKEY",
              help="A witness's verifier key: check the newest checkpoint it cosigned.")
@click.option("--witness", "witness_url", metavar="URL",
              help="Ask that witness for its latest checkpoint (else: local ones only).")
@pass_app
def verify(app: App, directory: Path | None, as_json: bool, expect_head: str | None,
           witness_key: str | None, witness_url: str | None) -> None:
    """Verify the hash chain of the audit log (DIR: the configured audit directory).

    Exit 0 when it verifies, 1 when it does not.
    """
    head = _parse_expect_head(expect_head)
    where = _directory(app, directory)
    if witness_url is not None and witness_key is None:
        raise click.UsageError("--witness needs --witness-key (the key its cosignatures "
                               "must verify with)")
    if witness_key is not None:
        _verify_witnessed(app, where, directory is not None, as_json, head,
                          parse_witness_key(witness_key), witness_url)
        return
    kept = KeptAssertions()
    gc.disable()  # the verifier makes no cycles; collecting while it runs costs it a sixth
    try:
        report = _verify(where, head, on_line=kept.feed_line, on_block=kept.feed_block)
    except OSError as exc:
        raise _unreadable(where, exc) from exc
    finally:
        gc.enable()
    assertions = kept.check(where)
    if as_json:
        document = unstructure(report)
        document["checkpoint"] = None
        document["assertions"] = assertions_json(assertions)
        click.echo(dumps_terminal(document))
    else:
        width = terminal_width()
        for line in assertion_lines(assertions) + report_lines(report):
            click.echo(wrap_line(line, width))
    sys.exit(0 if report.ok and not assertions.failures else 1)


def _verify_witnessed(app: App, where: Path, explicit: bool, as_json: bool,
                      head: tuple[int, str] | None, key: VerifierKey,
                      witness_url: str | None) -> None:
    kept = KeptAssertions()
    try:
        report, finding, facts = check_checkpoint(
            where, home=app.config.home, explicit_dir=explicit, witness_key=key,
            witness_url=witness_url, expect_head=head, on_record=kept.feed)
    except OSError as exc:
        raise _unreadable(where, exc) from exc
    assertions = kept.check(where)
    if as_json:
        document = unstructure(report)
        json_additions(document, report, finding, facts)
        document["assertions"] = assertions_json(assertions)
        click.echo(dumps_terminal(document))
    else:
        width = terminal_width()  # issue 22 item 16b: untrusted names wrap behind the gutter
        for line in (assertion_lines(assertions) + report_lines(report)
                     + checkpoint_lines(report, finding, facts, witness_url)):
            click.echo(wrap_line(line, width))
    ok = report.ok and finding.verdict == "ok" and not assertions.failures
    sys.exit(0 if ok else 1)


@audit.command()
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@pass_app
def head(app: App, directory: Path | None) -> None:
    """Print the head of the log as SEQ:HASH, to keep somewhere else.

    Exit 1 when the log does not verify or has no record yet.
    """
    where = _directory(app, directory)
    try:
        report = _verify(where, None)
    except OSError as exc:
        raise _unreadable(where, exc) from exc
    if not report.ok:
        failed = report.unaccepted
        raise NotFine(
            f"the audit log does not verify ({_plural(len(failed), 'failure')}); "
            f"`bxctl audit verify` says where. See {condition('audit_chain_broken')}"
        )
    if report.head is None:
        raise NotFine("the audit log has no record yet, so it has no head")
    click.echo(f"{report.head.seq}:{report.head.hash}")


# -- show ------------------------------------------------------------------------------


def _parse_since(value: str | None) -> str | None:
    """A date or time (UTC when no zone is given) -> a comparable ts string."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.removesuffix("Z") if value.endswith("Z")
                                        else value)
    except ValueError:
        raise click.BadParameter(
            "expected a date YYYY-MM-DD or a time YYYY-MM-DDTHH:MM[:SS] (UTC)",
            param_hint="--since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_ts(moment)


def _iter_stored(directory: Path) -> Iterator[tuple[str, int, bytes, Record | None]]:
    """(file, line, stored bytes, record or None) for every line of the day files."""
    for log_file in list_log_files(directory):
        if not log_file.day_file:
            continue
        for number, (content, newline) in enumerate(iter_lines(log_file.path), start=1):
            record: Record | None = None
            if newline:
                try:
                    record = parse_record(content)
                except DecodeError:
                    record = None
            yield log_file.name, number, content, record


def _outcome(record: Record) -> str:
    """A short summary of what the record says, escaped."""
    payload: dict[str, Any] = unstructure(record.event)
    key = event_key(record.event)
    text: str
    if key == "decision":
        ((tag, inner),) = payload["outcome"].items()
        text = tag
        if tag == "ask":
            text += f" (approval {inner['approval_id']}, expires {inner['expires_at']})"
        elif tag == "denied":
            text += f" {inner['code']}: {inner['reason']}"
        if payload["grant"] is not None:
            text += f" by grant {payload['grant']}"
    elif key == "approval":
        text = f"{payload['verdict']} (approval {payload['approval_id']})"
        if payload["by"] is not None:
            text += f" by uid {payload['by']}"
        redecision = payload["redecision"]
        if redecision is not None:
            ((tag, inner),) = redecision["outcome"].items()
            text += f", then {tag}" + (f" {inner['code']}: {inner['reason']}" if inner else "")
        if payload["reason"] is not None:
            text += f": {payload['reason']}"
        if payload.get("passkey") is not None:
            text += f", with passkey {payload['passkey']['credential_id']}"
    elif key == "passkey":
        text = (f"{payload['action']} {payload['credential_id']} ({payload['name']}) by uid "
                f"{payload['by']}")
    elif key == "approval_attempt":
        named = payload["approval_id"]
        text = (f"refused for want of a passkey{'' if named is None else f' (approval {named})'}"
                f" by uid {payload['by']}: {payload['reason']}")
    elif key == "result":
        text = f"{payload['status']}, {payload['label']}"
        text += ", untrusted" if payload["untrusted"] else ""
        if payload["output"] is not None:
            text += f", {payload['output']['bytes']} bytes"
        if payload.get("source") is not None:
            text += _source_text(payload["source"])
    elif key in ("sources", "mcp_pin", "mcp_server"):
        text = _mcp_text(key, payload)
    elif key == "declassify":
        before, after = payload["from"], payload["to"]
        text = (f"{before['label']}{'/untrusted' if before['untrusted'] else ''} -> "
                f"{after['label']}{'/untrusted' if after['untrusted'] else ''} by uid "
                f"{payload['by']}: {payload['reason']}")
    elif key == "start":
        grants = payload["grants"]
        text = (f"version {payload['version']}, pid {payload['pid']}, "
                f"{grants['count']} grants{'' if grants['ok'] else ' (invalid)'}")
    elif key == "stop":
        text = payload["reason"]
    elif key == "grants":
        text = f"{payload['count']} grants, {'ok' if payload['ok'] else 'invalid'}"
        if payload["problem_count"]:
            text += f", {payload['problem_count']} problems"
    elif key == "recovery":
        text = f"closed off {payload['file']} line {payload['line']} ({payload['bytes']} bytes)"
    elif key == "break":
        first = payload["first"]
        text = (f"accepts {payload['failures']} failures from {first['file']} line "
                f"{first['line']} ({first['kind']}), by uid {payload['by']}")
    elif payload.get("omitted") is not None:  # a call whose arguments were too long
        omitted = payload["omitted"]
        text = f"arguments omitted: {omitted['bytes']} bytes, sha256 {omitted['sha256']}"
    else:  # call
        text = dumps(payload["args"], ascii_only=True)
    return escape_line(text)


def _source_text(source: dict[str, Any]) -> str:
    """A result's `source` (12): tool names and hosts are the server's, escaped by the caller."""
    exit_code = "none" if source["exit"] is None else str(source["exit"])
    if source["kind"] == "command":
        return f", container {source['container']} exit {exit_code}"
    text = f", mcp {source['server']}/{source['mcp_name']} exit {exit_code}"
    if source["is_error"]:
        text += " (isError)"
    hosts = [f"{e['host'] or e['address'] or '?'}:{e['port']}"
             + (f" refused {e['refused']}" if e["refused"] else "") for e in source["egress"]]
    if hosts:
        text += ", egress " + ", ".join(hosts) + (" (truncated)" if source["egress_truncated"]
                                                  else "")
    return text


def _mcp_text(key: str, payload: dict[str, Any]) -> str:
    """`sources`, `mcp_pin` and `mcp_server` records (12), escaped by the caller."""
    if key == "sources":
        text = f"{payload['count']} servers, {'ok' if payload['ok'] else 'invalid'}"
        return text + (f", {payload['problem_count']} problems" if payload["problem_count"]
                       else "")
    if key == "mcp_pin":
        text = f"{payload['action']} {payload['server']}"
        if payload["digest"] is not None:
            text += f" {payload['digest']} ({payload['tools']} tools, {payload['protocol']})"
        text += f" by uid {payload['by']}"
        if payload["passkey"] is not None:
            text += f", with passkey {payload['passkey']['credential_id']}"
        return text + (f": {payload['reason']}" if payload["reason"] is not None else "")
    text = f"{payload['event']} {payload['server']}"
    for name in ("call", "probe_id"):
        if payload[name] is not None:
            text += f" ({name.replace('_id', '')} {payload[name]})"
    drift = payload["drift"]
    if drift is not None:
        text += "".join(f", {name} {' '.join(drift[name])}" for name in
                        ("added", "removed", "changed") if drift[name])
    egress = payload.get("egress")
    if egress is not None:  # probed (issue 26): the probe's connections
        refused = sum(1 for item in egress if item["refused"] is not None)
        text += (f", {len(egress)}{'+' if payload['egress_truncated'] else ''} connections"
                 f" ({refused} refused)")
    return text + (f": {payload['reason']}" if payload["reason"] is not None else "")


def show_line(record: Record, session: str | None, tool: str | None) -> str:
    """One readable line: time, seq, event, session, tool, outcome."""
    return "  ".join([
        record.ts,
        str(record.seq),
        event_key(record.event).ljust(10),
        escape_line(session) if session is not None else "-",
        escape_line(tool) if tool is not None else "-",
        _outcome(record),
    ])


@audit.command()
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--session", help="Only this session's records (and those of its calls).")
@click.option("--call", "call", type=str, metavar="N",
              help="Only call N: its call record and the records that name it.")
@click.option("--since", metavar="DATE", help="Only records at or after DATE (UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as stored.")
@pass_app
def show(app: App, directory: Path | None, session: str | None, call: str | None,
         since: str | None, as_json: bool) -> None:
    """Print the records of the audit log, one line each (escaped)."""
    if session is not None and _SESSION.fullmatch(session) is None:
        raise click.BadParameter("expected a session name [a-z0-9][a-z0-9-]{0,63}",
                                 param_hint="--session")
    call_id: int | None = None
    if call is not None:
        if re.fullmatch(r"0|[1-9][0-9]{0,19}", call) is None or int(call) > _U64_MAX:
            raise click.BadParameter("expected a call id (a decimal seq)", param_hint="--call")
        call_id = int(call)
    since_ts = _parse_since(since)
    where = _directory(app, directory)
    keep = _filter(session, call_id, since_ts)
    width = terminal_width()
    skipped = 0
    try:
        for file, number, content, record in _iter_stored(where):
            if record is None:
                skipped += 1
                if not as_json and session is None and call_id is None and since_ts is None:
                    click.echo(wrap_line(f"{escape_line(file)} line {number}: not a record",
                                         width))
                continue
            shown = keep(record)
            if shown is None:
                continue
            if as_json:
                # a record line is ASCII JSON (controls escaped): safe to print
                click.echo(content.decode("ascii"))
            else:
                click.echo(wrap_line(show_line(record, *shown), width))
    except OSError as exc:
        raise _unreadable(where, exc) from exc
    if skipped and as_json:
        what = "1 line that is not a record" if skipped == 1 else (
            f"{skipped} lines that are not records")
        click.echo(f"bxctl: left out {what} (`bxctl audit verify` says where)", err=True)


def _filter(session: str | None, call_id: int | None,
            since_ts: str | None) -> Callable[[Record], tuple[str | None, str | None] | None]:
    """A function: record -> (session, tool) to show it with, or None to leave it out."""
    calls: dict[int, tuple[str, str]] = {}

    def keep(record: Record) -> tuple[str | None, str | None] | None:
        event: Any = record.event
        key = event_key(event)
        record_session: str | None = None
        tool: str | None = None
        referenced: int | None = None
        if key == "call":
            calls[record.seq] = (event.session, event.tool)
            record_session, tool = event.session, event.tool
            referenced = record.seq
        elif key in ("decision", "approval", "result", "mcp_server"):
            referenced = event.call
            if referenced is not None:
                record_session, tool = calls.get(referenced, (None, None))
        elif key == "declassify":
            record_session = event.session
        if session is not None and record_session != session:
            return None
        if call_id is not None and referenced != call_id:
            return None
        if since_ts is not None and record.ts < since_ts:
            return None
        return record_session, tool

    return keep


audit.add_command(key_command)
