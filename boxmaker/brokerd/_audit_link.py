"""Opening the audit log at start, and recomputing the session taints from it.

The writer's start-up (lock, verify, torn tail, accepted break) belongs to the
audit writer's modules; this adapter calls it and then reads the log's records
once more to rebuild the taints (04-audit "Session state").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from ..proto._audit import (
    GENESIS_PREV,
    Call,
    Declassify,
    Record,
    ResultRecord,
    is_day_file_name,
    line_hash,
    parse_record,
)
from ..proto._errors import DecodeError
from ..proto._taint import Taint
from ._audit_writer import (
    AuditChainBroken,
    AuditWriter,
    FsyncFn,
    WriteFn,
    lock_audit_dir,
    open_audit_dir,
    thread_fsync,
)
from ._config import BrokerdConfig
from ._state import TaintChange, rebuild


@attrs.frozen(kw_only=True)
class AuditStartup:
    writer: AuditWriter
    taints: dict[str, tuple[Taint, int]]
    known_sessions: list[str]
    head_seq: int | None


def day_files(directory: Path) -> list[str]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if is_day_file_name(n))


def iter_records(directory: Path) -> Iterator[Record]:
    """Every line of the log that parses as a record, in order (start-up verified the rest)."""
    for name in day_files(directory):
        with open(directory / name, "rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    continue
                try:
                    yield parse_record(line)
                except DecodeError:
                    continue


def taint_changes(records: Iterator[Record], known: set[str]) -> Iterator[TaintChange]:
    """`result` and `declassify` records as taint changes; `known` collects session names."""
    sessions_of_calls: dict[int, str] = {}
    for record in records:
        event = record.event
        if isinstance(event, Call):
            sessions_of_calls[record.seq] = event.session
            known.add(event.session)
        elif isinstance(event, ResultRecord):
            session = sessions_of_calls.pop(event.call, None)
            if session is not None:
                yield TaintChange(seq=record.seq, session=session, taint=event.state)
        elif isinstance(event, Declassify):
            known.add(event.session)
            yield TaintChange(seq=record.seq, session=event.session, taint=event.to)


def rebuild_from_log(directory: Path) -> tuple[dict[str, tuple[Taint, int]], list[str]]:
    known: set[str] = set()
    taints = rebuild(taint_changes(iter_records(directory), known))
    return taints, sorted(known)


def _simple_start(directory: Path, fsync: FsyncFn | None, write: WriteFn) -> AuditWriter:
    """Lock and find where the chain ends (a stand-in for the writer's full start-up)."""
    dir_fd = open_audit_dir(directory)
    lock_fd = lock_audit_dir(dir_fd)
    next_seq, prev, current = 0, GENESIS_PREV, None
    for name in day_files(directory):
        data = (directory / name).read_bytes()
        if data:
            current = name
        for line in data.splitlines(keepends=True):
            try:
                record = parse_record(line)
            except DecodeError as exc:
                os.close(lock_fd)
                os.close(dir_fd)
                raise AuditChainBroken(
                    f"brokerd: the audit log does not verify ({name}: {exc}); refusing to start. "
                    "See docs/runbook.md#audit-chain-broken"
                ) from exc
            next_seq, prev = record.seq + 1, line_hash(line)
    return AuditWriter(dir_fd=dir_fd, lock_fd=lock_fd, next_seq=next_seq, prev=prev,
                       current_file=current, fsync=fsync, write=write)


async def open_audit(config: BrokerdConfig, *, accept_break: bool, fsync: FsyncFn | None,
                     write: WriteFn = os.write) -> AuditStartup:
    """Start the writer and rebuild the taints.  Raises AuditError."""
    chosen: FsyncFn | None = (fsync or thread_fsync) if config.fsync else None
    writer = _simple_start(config.audit, chosen, write)
    taints, known = rebuild_from_log(config.audit)
    head = writer.next_seq - 1 if writer.next_seq > 0 else None
    return AuditStartup(writer=writer, taints=taints, known_sessions=known, head_seq=head)
