"""Start-up of brokerd's audit log (04-audit "Start-up").

1. Take the lock (`audit/.lock`).
2. Verify the whole log with the shared `ChainVerifier`.  An unaccepted
   failure refuses the start (`AuditChainBroken`), unless `accept_break`.
3. Torn tail: end the torn line with ``\\n`` in its own file and append a
   `recovery` record describing it to that same file (even when an empty file
   of a later day exists).
4. Accepted break: append a `break` record naming the first unaccepted
   failure and counting them all.
5. Hand back an `AuditWriter` positioned after the last record; writing
   `start` is the caller's (brokerd's) job.

Reading and verifying the log is blocking file work; it runs on the calling
thread (brokerd is not serving yet).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import attrs

from boxmaker._audit_files import list_log_files, verify_directory
from boxmaker.proto.audit import Event, Record, encode_record, line_hash
from boxmaker.proto.wire import format_ts

from ..._state_files import open_regular
from ...proto.audit import ChainReport
from ._audit_writer import (
    AuditChainBroken,
    AuditUnavailable,
    AuditWriter,
    Clock,
    FsyncFn,
    WriteFn,
    lock_audit_dir,
    open_audit_dir,
    open_existing_day_file,
    thread_fsync,
    utc_now,
    write_all,
)

RecordCallback = Callable[[Record], None]


@attrs.frozen(kw_only=True)
class StartupReport:
    """What start-up found and did."""

    chain: ChainReport
    """The verifier's report of the log as found, before anything was appended."""
    recovery: Record | None
    """The `recovery` record written for a torn tail, if there was one."""
    break_record: Record | None
    """The `break` record written under `accept_break`, if one was needed."""
    next_seq: int
    """The seq the next record (brokerd's `start`) gets."""
    head_hash: str
    """The hash of the last record, the next record's `prev`."""

    @property
    def unfinished_calls(self) -> list[int]:
        return list(self.chain.unfinished_calls)


async def open_audit_log(
    directory: os.PathLike[str] | str,
    *,
    accept_break: bool = False,
    by_uid: int,
    clock: Clock = utc_now,
    fsync: FsyncFn | None = thread_fsync,
    on_record: RecordCallback | None = None,
    write: WriteFn = os.write,
) -> tuple[AuditWriter, StartupReport]:
    """Lock, verify, recover and open the audit log in `directory`.

    `on_record` sees every record the verifier takes into the chain, in order,
    while it verifies (for rebuilding session state); the `recovery` and
    `break` written here are in the report instead.  When this raises, discard
    what `on_record` saw.  `by_uid` is the owner named in a `break` record.
    The writer holds the lock until `aclose`.

    Raises `AuditLocked`, `AuditChainBroken` or `AuditUnavailable`.
    """
    dir_fd = open_audit_dir(directory)
    lock_fd = -1
    try:
        lock_fd = lock_audit_dir(dir_fd)
        path = Path(directory)
        try:
            chain = verify_directory(path, on_record=on_record)
            newest = _newest_day_file(path)
        except OSError as exc:
            raise AuditUnavailable(
                "brokerd: the audit log cannot be written (reading it failed: "
                f"{exc.strerror or exc}); refusing every call"
            ) from exc
        unaccepted = chain.unaccepted
        if unaccepted and not accept_break:
            first = unaccepted[0]
            raise AuditChainBroken(
                f"brokerd: the audit log does not verify: {first.kind} in {first.file} "
                f"line {first.line} ({len(unaccepted)} unaccepted failure(s)); refusing "
                "to start"
            )
        next_seq, prev = chain.next_seq, chain.next_prev
        # Step 3: a torn tail is closed off in its own file.
        recovery = None
        if chain.torn_tail is not None:
            recovery = await _recover_torn_tail(
                dir_fd, chain, next_seq, prev, clock=clock, fsync=fsync, write=write
            )
            next_seq, prev = recovery.seq + 1, line_hash(encode_record(recovery))
        # Step 4: the break goes at the very end of the log (the newest file);
        # its seq counts lines, its prev is the hash of the line before it.
        break_record = None
        if unaccepted:
            assert newest is not None  # a failure lies in some file
            if recovery is None:
                break_seq, break_prev = chain.break_seq, chain.break_prev
            else:  # the recovery, just written, is the line before it
                break_seq, break_prev = next_seq, prev
            break_record = _record(break_seq, break_prev, chain.break_event(by_uid), clock)
            line = encode_record(break_record)
            await _append_lines(dir_fd, newest, line + b"\n", fsync=fsync, write=write)
            next_seq, prev = break_record.seq + 1, line_hash(line)
        writer = AuditWriter(
            dir_fd=dir_fd,
            lock_fd=lock_fd,
            next_seq=next_seq,
            prev=prev,
            current_file=newest,
            clock=clock,
            fsync=fsync,
            write=write,
        )
    except BaseException:
        if lock_fd >= 0:
            os.close(lock_fd)
        os.close(dir_fd)
        raise
    report = StartupReport(
        chain=chain,
        recovery=recovery,
        break_record=break_record,
        next_seq=next_seq,
        head_hash=prev,
    )
    return writer, report


def _newest_day_file(directory: Path) -> str | None:
    """The newest day file (by name), empty or not: the writer goes on there."""
    names = [f.name for f in list_log_files(directory) if f.day_file]
    return max(names) if names else None


async def _append_lines(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    fsync: FsyncFn | None,
    write: WriteFn,
) -> None:
    """Append bytes to an existing day file in one write, then fsync it."""
    fd = open_existing_day_file(dir_fd, name)
    try:
        try:
            write_all(write, fd, data)
            if fsync is not None:
                await fsync(fd)
        except OSError as exc:
            raise AuditUnavailable(
                f"brokerd: the audit log cannot be written (start-up append to {name} "
                f"failed: {exc.strerror or exc}); refusing every call"
            ) from exc
    finally:
        os.close(fd)


def _torn_bytes(dir_fd: int, name: str) -> bytes:
    """The bytes after the file's last ``\\n``."""
    fd = open_regular(name, dir_fd=dir_fd)
    try:
        size = os.fstat(fd).st_size
        chunk = 1 << 16
        tail = b""
        position = size
        while position > 0:
            step = min(chunk, position)
            position -= step
            tail = os.pread(fd, step, position) + tail
            newline = tail.rfind(b"\n")
            if newline >= 0:
                return tail[newline + 1 :]
        return tail
    finally:
        os.close(fd)


async def _recover_torn_tail(
    dir_fd: int,
    chain: ChainReport,
    seq: int,
    prev: str,
    *,
    clock: Clock,
    fsync: FsyncFn | None,
    write: WriteFn,
) -> Record:
    torn = chain.torn_tail
    assert torn is not None
    event = chain.recovery_event()
    assert torn is not None and event is not None
    try:
        torn_bytes = _torn_bytes(dir_fd, torn.file)
    except OSError as exc:
        raise AuditUnavailable(
            f"brokerd: the audit log cannot be written (reading {torn.file} failed: "
            f"{exc.strerror or exc}); refusing every call"
        ) from exc
    if len(torn_bytes) != event.bytes or hashlib.sha256(torn_bytes).hexdigest() != event.sha256:
        raise AuditUnavailable(
            f"brokerd: the audit log cannot be written ({torn.file} changed during "
            "start-up); refusing every call"
        )
    record = _record(seq, prev, event, clock)
    # One write: the torn line's end and the record that explains it.
    await _append_lines(
        dir_fd, torn.file, b"\n" + encode_record(record) + b"\n", fsync=fsync, write=write
    )
    return record


def _record(seq: int, prev: str, event: Event, clock: Clock) -> Record:
    return Record(seq=seq, ts=format_ts(clock()), prev=prev, event=event)
