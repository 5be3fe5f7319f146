"""brokerd's audit writer (04-audit "Writer"): the only code that appends to
the audit log.

- `audit/.lock` is flocked exclusively for the writer's whole life and never
  unlinked (`lock_audit_dir`).
- One file per UTC day.  A new day's file is created with ``O_CREAT | O_EXCL``
  and the directory is fsynced; a file for that day that already exists is used
  only if it is empty.  The writer never goes back to an earlier day's file.
- Group commit: concurrent `AuditWriter.append` calls share one write + fsync;
  nobody returns before the fsync covering its records has returned.  The task
  that finds no flush running leads the next one (shielded from cancellation:
  lines taken from the queue are written or failed, never lost); the others
  wait for it.
- Sticky failure: after a write or fsync fails every later append raises
  `AuditUnavailable`, and so do the waiters of the failed batch and of every
  batch queued behind it.

Start-up (lock, verify, recover, break) is in `_audit_startup`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import trio

from boxmaker.proto.audit import (
    Event,
    Record,
    day_file_name,
    encode_record,
    line_hash,
)
from boxmaker.proto.wire import format_ts

from ..._errors import UnavailableError

LOCK_NAME = ".lock"

Clock = Callable[[], datetime]
"""The wall clock: returns an aware datetime (converted to UTC)."""

FsyncFn = Callable[[int], Awaitable[None]]
"""fsync of a file descriptor (a day file or the audit directory)."""

WriteFn = Callable[[int, bytes], int]
"""os.write's shape; injectable so tests can make writes fail."""


# --------------------------------------------------------------------------
# Errors, split by fault


class AuditError(UnavailableError):
    """Base class: the audit log cannot be used."""

    wire_code = "audit_unavailable"
    runbook = "docs/runbook.md#audit-unavailable"
    answer_shows_runbook = True


class AuditLocked(AuditError):
    """Another writer holds the audit directory's lock (environment)."""

    runbook = "docs/runbook.md#audit-locked"


class AuditChainBroken(AuditError):
    """Start-up verification found an unaccepted failure (the log's content)."""

    runbook = "docs/runbook.md#audit-chain-broken"


class AuditUnavailable(AuditError):
    """A write, fsync or file rule failed; sticky until restart (environment)."""

    runbook = "docs/runbook.md#audit-unavailable"


def _unavailable(what: str) -> AuditUnavailable:
    return AuditUnavailable(
        f"brokerd: the audit log cannot be written ({what}); refusing every call"
    )


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


# --------------------------------------------------------------------------
# Clock and fsync


def utc_now() -> datetime:
    return datetime.now(UTC)


async def thread_fsync(fd: int) -> None:
    """The default: `os.fsync` in a worker thread, off the event loop."""
    await trio.to_thread.run_sync(os.fsync, fd)


async def inline_fsync(fd: int) -> None:
    """`os.fsync` on the event loop thread: for tests under a mock clock."""
    os.fsync(fd)


# --------------------------------------------------------------------------
# The lock


def lock_audit_dir(dir_fd: int) -> int:
    """Take `.lock` in the directory exclusively; return its descriptor.

    The lock lives as long as the descriptor: close it to release.  A second
    open of the same file (this process or another) cannot take it.
    """
    try:
        fd = os.open(
            LOCK_NAME,
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
            0o600,
            dir_fd=dir_fd,
        )
    except OSError as exc:
        raise _unavailable(f"cannot open the lock file: {_describe(exc)}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise AuditLocked(
            "brokerd: another brokerd holds the audit log's lock (audit/.lock); "
            "refusing to start"
        ) from exc
    except OSError as exc:
        os.close(fd)
        raise _unavailable(f"cannot lock audit/.lock: {_describe(exc)}") from exc
    return fd


def open_audit_dir(directory: os.PathLike[str] | str) -> int:
    """A descriptor of the audit directory (created 0700 if missing)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _unavailable(f"cannot open the audit directory: {_describe(exc)}") from exc


# --------------------------------------------------------------------------
# Day files


_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


def open_existing_day_file(dir_fd: int, name: str) -> int:
    """Open a day file that start-up verified, for appending."""
    try:
        fd = os.open(name, _APPEND_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _unavailable(f"cannot open {name}: {_describe(exc)}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _unavailable(f"{name} is not a regular file")
    return fd


async def create_day_file(dir_fd: int, name: str, fsync: FsyncFn | None) -> int:
    """Create the file of a new day (``O_EXCL``) and fsync the directory.

    A file of that name that already exists is used only when it is empty:
    anything else means that something other than this writer wrote there.
    """
    try:
        fd = os.open(name, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
    except FileExistsError:
        fd = open_existing_day_file(dir_fd, name)
        size = os.fstat(fd).st_size
        if size != 0:
            os.close(fd)
            raise _unavailable(
                f"{name} already exists and is not empty ({size} bytes): "
                "something other than brokerd wrote there"
            ) from None
        return fd
    except OSError as exc:
        raise _unavailable(f"cannot create {name}: {_describe(exc)}") from exc
    if fsync is not None:
        try:
            await fsync(dir_fd)
        except OSError as exc:
            os.close(fd)
            raise _unavailable(f"fsync of the audit directory failed: {_describe(exc)}") from exc
    return fd


def write_all(write: WriteFn, fd: int, data: bytes) -> None:
    """Write every byte (os.write may write fewer); raises OSError."""
    offset = 0
    while offset < len(data):
        written = write(fd, data[offset:] if offset else data)
        if written <= 0:
            raise OSError(errno.EIO, "write wrote nothing")
        offset += written


# --------------------------------------------------------------------------
# The writer


class _Batch:
    """Records queued together, made durable (or failed) together."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: AuditUnavailable | None = None

    def fail(self, error: AuditUnavailable) -> None:
        self.done = True
        self.error = error


class AuditWriter(trio.abc.AsyncResource):
    """Appends records to the log with group commit.  Built by start-up
    (`_audit_startup.open_audit_log`), which has verified the log and knows
    where the chain ends.  An async context manager: leaving it is `aclose`.

    `current_file` is the newest day file (`None` when there is none yet; the
    first append creates one).  `fsync=None` never fsyncs (tests, benchmarks).
    """

    def __init__(
        self,
        *,
        dir_fd: int,
        lock_fd: int,
        next_seq: int,
        prev: str,
        current_file: str | None,
        clock: Clock = utc_now,
        fsync: FsyncFn | None = thread_fsync,
        write: WriteFn = os.write,
    ) -> None:
        self._dir_fd = dir_fd
        self._lock_fd = lock_fd
        self._clock = clock
        self._fsync = fsync
        self._write = write
        self._next_seq = next_seq
        self._prev = prev
        self._file_name = current_file
        self._file_fd = (
            open_existing_day_file(dir_fd, current_file) if current_file is not None else None
        )
        self._dirty = False  # written since the last fsync
        self._queued_day = current_file  # the day file of the last queued record
        self._queue: list[tuple[str, bytes]] = []
        self._queue_batch = _Batch()
        self._flushing = False
        self._flush_finished = trio.Event()
        self._failure: AuditUnavailable | None = None
        self._closed = False
        self.on_durable: Callable[[list[bytes]], None] | None = None
        """Called with the lines of every batch once they are written and fsynced
        (the checkpointer's hook: it must not block or raise)."""

    # -- what callers see

    @property
    def next_seq(self) -> int:
        """The seq the next record will get."""
        return self._next_seq

    @property
    def head_hash(self) -> str:
        """The hash of the last record queued (the next record's `prev`)."""
        return self._prev

    @property
    def current_file(self) -> str | None:
        """The day file the next record goes to unless its day is later."""
        return self._queued_day

    @property
    def failure(self) -> AuditUnavailable | None:
        """The sticky failure, once the log became unavailable."""
        return self._failure

    async def append(self, events: Sequence[Event]) -> list[Record]:
        """Append one caller's events as consecutive records; return them once
        they are written and fsynced.

        Raises `AuditUnavailable` if the log is (or becomes) unavailable: then
        none of these records may be taken as written.  If the caller is
        cancelled while waiting, its records are still written (they are in
        the chain), by the next flush or by `aclose`.
        """
        if self._closed:
            raise trio.ClosedResourceError("the audit writer is closed")
        if self._failure is not None:
            raise self._failure
        if not events:
            await trio.lowlevel.checkpoint()
            return []
        records = self._enqueue(events)
        batch = self._queue_batch
        while not batch.done:
            if self._flushing:
                await self._flush_finished.wait()
            else:
                await self._lead_flush()
        if batch.error is not None:
            raise batch.error
        return records

    async def aclose(self) -> None:
        """Write what is still queued, then close the files and release the lock.
        Appends that start after this began are refused."""
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            while self._flushing or (self._queue and self._failure is None):
                if self._flushing:
                    await self._flush_finished.wait()
                else:
                    await self._lead_flush()
        if not self._queue_batch.done:  # only after a failure: never drop silently
            self._queue_batch.fail(self._failure or _unavailable("the writer closed"))
        if self._file_fd is not None:
            os.close(self._file_fd)
            self._file_fd = None
        os.close(self._dir_fd)
        os.close(self._lock_fd)  # releases the flock; the file stays

    # -- internals

    def _enqueue(self, events: Sequence[Event]) -> list[Record]:
        now = self._clock()
        ts = format_ts(now)
        day = day_file_name(now)
        # Never go back to an earlier day's file (the clock moved backwards).
        if self._queued_day is not None and day < self._queued_day:
            day = self._queued_day
        # Encode everything first: a bad event (our bug) must not leave half
        # a batch in the chain.
        records: list[Record] = []
        lines: list[tuple[str, bytes]] = []
        seq, prev = self._next_seq, self._prev
        for event in events:
            record = Record(seq=seq, ts=ts, prev=prev, event=event)
            line = encode_record(record)
            records.append(record)
            lines.append((day, line))
            seq, prev = seq + 1, line_hash(line)
        self._queued_day = day
        self._queue.extend(lines)
        self._next_seq, self._prev = seq, prev
        return records

    async def _lead_flush(self) -> None:
        """Write and fsync everything queued, on behalf of every waiter."""
        self._flushing = True
        finished = self._flush_finished = trio.Event()
        try:
            with trio.CancelScope(shield=True):
                # Let appenders that are ready in this same moment join the batch.
                await trio.lowlevel.checkpoint()
                lines, batch = self._queue, self._queue_batch
                self._queue, self._queue_batch = [], _Batch()
                try:
                    await self._write_and_sync(lines)
                except AuditUnavailable as exc:
                    self._fail_all(batch, exc)
                except OSError as exc:
                    self._fail_all(batch, _unavailable(_describe(exc)))
                except BaseException:
                    # Our bug (or an injected function's): nobody may wait forever
                    # for lines that will never be written.
                    self._fail_all(batch, _unavailable("an internal error while writing"))
                    raise
                else:
                    batch.done = True
                    if self.on_durable is not None:
                        self.on_durable([line for _, line in lines])
        finally:
            self._flushing = False
            finished.set()

    def _fail_all(self, batch: _Batch, failure: AuditUnavailable) -> None:
        """The log is unavailable from now on: fail this batch and everything
        queued behind it (chained on lines that may not exist), unwritten."""
        self._failure = failure
        batch.fail(failure)
        self._queue_batch.fail(failure)
        self._queue = []

    async def _write_and_sync(self, lines: list[tuple[str, bytes]]) -> None:
        start = 0
        while start < len(lines):
            day = lines[start][0]
            end = start
            while end < len(lines) and lines[end][0] == day:
                end += 1
            if self._file_fd is None or self._file_name is None or day > self._file_name:
                await self._switch_to(day)
            assert self._file_fd is not None
            data = b"".join(line + b"\n" for _, line in lines[start:end])
            try:
                write_all(self._write, self._file_fd, data)
            except OSError as exc:
                raise _unavailable(f"write to {self._file_name} failed: {_describe(exc)}") from exc
            self._dirty = True
            start = end
        await self._sync_current()

    async def _sync_current(self) -> None:
        if not self._dirty or self._file_fd is None:
            return
        self._dirty = False
        if self._fsync is None:
            return
        try:
            await self._fsync(self._file_fd)
        except OSError as exc:
            raise _unavailable(f"fsync of {self._file_name} failed: {_describe(exc)}") from exc

    async def _switch_to(self, day: str) -> None:
        if self._file_fd is not None:
            await self._sync_current()
        new_fd = await create_day_file(self._dir_fd, day, self._fsync)
        if self._file_fd is not None:
            os.close(self._file_fd)
        self._file_fd, self._file_name = new_fd, day
