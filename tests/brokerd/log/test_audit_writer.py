"""The audit writer: lock, day files, group commit, fsync, sticky failure."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio
import trio.testing

from boxmaker._audit_files import verify_directory
from boxmaker._error_table import shown
from boxmaker.brokerd.log._audit_writer import (
    LOCK_NAME,
    AuditLocked,
    AuditUnavailable,
    AuditWriter,
    FsyncFn,
    WriteFn,
    inline_fsync,
    lock_audit_dir,
    open_audit_dir,
    thread_fsync,
)
from boxmaker.proto.audit._audit import GENESIS_PREV, Record, Stop, line_hash, parse_record

DAY1 = datetime(2026, 11, 28, 23, 59, 59, 900000, tzinfo=UTC)
DAY2 = datetime(2026, 11, 29, 0, 0, 0, 100000, tzinfo=UTC)
DAY3 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """A wall clock the test sets."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class FsyncCounter:
    """Counts fsyncs of day files and of the directory, then really fsyncs."""

    def __init__(self, *, threaded: bool = False) -> None:
        self.files = 0
        self.dirs = 0
        self.threaded = threaded

    async def __call__(self, fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            self.dirs += 1
        else:
            self.files += 1
        if self.threaded:
            await thread_fsync(fd)
        else:
            await inline_fsync(fd)


def make_writer(
    directory: Path,
    *,
    clock: Callable[[], datetime] | None = None,
    fsync: FsyncFn | None = inline_fsync,
    write: WriteFn = os.write,
) -> AuditWriter:
    dir_fd = open_audit_dir(directory)
    lock_fd = lock_audit_dir(dir_fd)
    return AuditWriter(
        dir_fd=dir_fd,
        lock_fd=lock_fd,
        next_seq=0,
        prev=GENESIS_PREV,
        current_file=None,
        clock=clock or FakeClock(DAY2),
        fsync=fsync,
        write=write,
    )


def read_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


def stop(n: int) -> Stop:
    return Stop(reason=f"r{n}")


def check_chain(lines: list[bytes], first_seq: int = 0, prev: str = GENESIS_PREV) -> None:
    for offset, line in enumerate(lines):
        record = parse_record(line)
        assert record.seq == first_seq + offset
        assert record.prev == prev
        prev = line_hash(line)


async def test_append_writes_chained_records(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    first = await writer.append([stop(0), stop(1)])
    second = await writer.append([stop(2)])
    await writer.aclose()
    assert [r.seq for r in first + second] == [0, 1, 2]
    assert first[0].prev == GENESIS_PREV
    lines = read_lines(tmp_path / "2026-11-29.jsonl")
    check_chain(lines)
    assert [parse_record(line) for line in lines] == first + second
    assert first[0].ts == "2026-11-29T00:00:00.100000Z"


async def test_empty_append_writes_nothing(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    assert await writer.append([]) == []
    await writer.aclose()
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


async def test_concurrent_appenders_share_fsyncs(tmp_path: Path) -> None:
    counter = FsyncCounter(threaded=True)
    writer = make_writer(tmp_path, fsync=counter)
    results: list[list[Record]] = []

    async def one(n: int) -> None:
        results.append(await writer.append([stop(n), stop(n)]))

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(one, n)
    await writer.aclose()
    assert len(results) == 40
    assert counter.files < 40 / 2  # shared: far fewer fsyncs than appenders
    assert counter.files >= 1
    for batch in results:  # each caller's records are consecutive
        assert batch[1].seq == batch[0].seq + 1
    lines = read_lines(tmp_path / "2026-11-29.jsonl")
    assert len(lines) == 80
    check_chain(lines)


class GatedFsync:
    """An fsync of a day file that blocks until the test lets it return
    (directory fsyncs pass).  `release_all` frees every gate, for a test that
    fails while the writer's shielded flush waits on one."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[trio.Event](100)
        self.calls = 0
        self.gates: list[trio.Event] = []
        self.released = False
        self.failing = False  # once set, every fsync raises EIO after its gate

    async def __call__(self, fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode) and not self.released:
            self.calls += 1
            gate = trio.Event()
            self.gates.append(gate)
            self.send.send_nowait(gate)
            await gate.wait()
        if self.failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)

    def release_all(self) -> None:
        self.released = True
        for gate in self.gates:
            gate.set()


async def test_nobody_returns_before_its_fsync_returned(tmp_path: Path) -> None:
    gated = GatedFsync()
    writer = make_writer(tmp_path, fsync=gated)
    returned: list[int] = []

    async def one(n: int) -> None:
        await writer.append([stop(n)])
        returned.append(n)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(one, 0)
                first_gate = await gated.receive.receive()  # batch 1 (task 0) in fsync
                for n in range(1, 6):
                    nursery.start_soon(one, n)
                await trio.testing.wait_all_tasks_blocked()
                assert returned == []
                # The lines are written already; only the fsync is outstanding.
                assert len(read_lines(tmp_path / "2026-11-29.jsonl")) == 1
                first_gate.set()
                second_gate = await gated.receive.receive()  # batch 2: tasks 1..5
                await trio.testing.wait_all_tasks_blocked()
                assert returned == [0]
                second_gate.set()
            finally:
                gated.release_all()
    assert sorted(returned) == list(range(6))
    assert gated.calls == 2
    await writer.aclose()
    check_chain(read_lines(tmp_path / "2026-11-29.jsonl"))


async def test_cancelled_appender_records_are_still_written(tmp_path: Path) -> None:
    gated = GatedFsync()
    writer = make_writer(tmp_path, fsync=gated)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(writer.append, [stop(0)])
                gate = await gated.receive.receive()
                with trio.CancelScope() as scope:
                    scope.cancel()
                    # Queued behind the running flush, then cancelled while waiting.
                    await writer.append([stop(1)])
                gate.set()
                await trio.testing.wait_all_tasks_blocked()
                assert len(read_lines(tmp_path / "2026-11-29.jsonl")) == 1
                nursery.start_soon(writer.aclose)  # writes what is still queued
                (await gated.receive.receive()).set()
            finally:
                gated.release_all()
    check_chain(read_lines(tmp_path / "2026-11-29.jsonl"))
    assert len(read_lines(tmp_path / "2026-11-29.jsonl")) == 2


async def test_crossing_midnight_creates_a_new_file_and_fsyncs_the_directory(
    tmp_path: Path,
) -> None:
    clock = FakeClock(DAY1)
    counter = FsyncCounter()
    writer = make_writer(tmp_path, clock=clock, fsync=counter)
    await writer.append([stop(0)])
    assert counter.dirs == 1  # the first file is a new file too
    clock.now = DAY2
    await writer.append([stop(1)])
    assert counter.dirs == 2
    await writer.aclose()
    day1 = read_lines(tmp_path / "2026-11-28.jsonl")
    day2 = read_lines(tmp_path / "2026-11-29.jsonl")
    assert len(day1) == len(day2) == 1
    check_chain(day1 + day2)
    assert verify_directory(tmp_path).ok
    assert parse_record(day2[0]).ts.startswith("2026-11-29T00:00:00")


async def test_one_flush_across_midnight_fsyncs_both_files(tmp_path: Path) -> None:
    clock = FakeClock(DAY1)
    gated = GatedFsync()
    counter = FsyncCounter()

    async def fsync(fd: int) -> None:
        await counter(fd)
        await gated(fd)

    writer = make_writer(tmp_path, clock=clock, fsync=fsync)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(writer.append, [stop(0)])
                first = await gated.receive.receive()  # day 1, record 0
                nursery.start_soon(writer.append, [stop(1)])  # day 1, queued
                await trio.testing.wait_all_tasks_blocked()
                clock.now = DAY2
                nursery.start_soon(writer.append, [stop(2)])  # day 2, queued
                await trio.testing.wait_all_tasks_blocked()
                assert counter.dirs == 1
                first.set()
                # One flush: day 1's file is fsynced before day 2's is created,
                # then the directory, then day 2's file.
                (await gated.receive.receive()).set()
                (await gated.receive.receive()).set()
            finally:
                gated.release_all()
    assert counter.files == 3 and counter.dirs == 2
    await writer.aclose()
    day1 = read_lines(tmp_path / "2026-11-28.jsonl")
    day2 = read_lines(tmp_path / "2026-11-29.jsonl")
    assert (len(day1), len(day2)) == (2, 1)
    check_chain(day1 + day2)


async def test_clock_going_backwards_stays_on_the_newest_file(tmp_path: Path) -> None:
    clock = FakeClock(DAY2)
    writer = make_writer(tmp_path, clock=clock)
    await writer.append([stop(0)])
    clock.now = DAY1  # back across midnight
    records = await writer.append([stop(1)])
    assert records[0].ts == "2026-11-28T23:59:59.900000Z"  # the clock's own value
    clock.now = DAY2 + timedelta(hours=1)
    await writer.append([stop(2)])
    clock.now = DAY3
    await writer.append([stop(3)])
    await writer.aclose()
    assert not (tmp_path / "2026-11-28.jsonl").exists()
    day2 = read_lines(tmp_path / "2026-11-29.jsonl")
    day3 = read_lines(tmp_path / "2026-11-30.jsonl")
    assert len(day2) == 3 and len(day3) == 1
    check_chain(day2 + day3)
    assert verify_directory(tmp_path).ok  # the shared verifier agrees


async def test_existing_empty_file_for_a_new_day_is_used(tmp_path: Path) -> None:
    clock = FakeClock(DAY1)
    writer = make_writer(tmp_path, clock=clock)
    await writer.append([stop(0)])
    (tmp_path / "2026-11-29.jsonl").write_bytes(b"")
    clock.now = DAY2
    await writer.append([stop(1)])
    await writer.aclose()
    assert len(read_lines(tmp_path / "2026-11-29.jsonl")) == 1


async def test_existing_nonempty_file_for_a_new_day_makes_the_log_unavailable(
    tmp_path: Path,
) -> None:
    clock = FakeClock(DAY1)
    writer = make_writer(tmp_path, clock=clock)
    await writer.append([stop(0)])
    (tmp_path / "2026-11-29.jsonl").write_bytes(b"someone else\n")
    clock.now = DAY2
    with pytest.raises(AuditUnavailable, match="not empty") as info:
        await writer.append([stop(1)])
    assert shown(str(info.value), info.value).endswith("docs/runbook.md#audit-unavailable")
    clock.now = DAY1
    with pytest.raises(AuditUnavailable):  # sticky, even back on day 1
        await writer.append([stop(2)])
    await writer.aclose()
    assert (tmp_path / "2026-11-29.jsonl").read_bytes() == b"someone else\n"
    assert len(read_lines(tmp_path / "2026-11-28.jsonl")) == 1


class FailingFsync:
    def __init__(self, fail_at: int) -> None:
        self.calls = 0
        self.fail_at = fail_at

    async def __call__(self, fd: int) -> None:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        if self.calls >= self.fail_at:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)


async def test_fsync_failure_is_sticky_for_every_waiter_and_later_append(
    tmp_path: Path,
) -> None:
    failing = FailingFsync(fail_at=3)  # 1: directory, 2: first batch, 3: fails
    writer = make_writer(tmp_path, fsync=failing)
    await writer.append([stop(0)])
    errors: list[AuditUnavailable] = []

    async def one(n: int) -> None:
        try:
            await writer.append([stop(n)])
        except AuditUnavailable as exc:
            errors.append(exc)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for n in range(1, 6):
                nursery.start_soon(one, n)
    assert len(errors) == 5  # every waiter of the failed batch (and any behind it)
    assert "Input/output error" in str(errors[0])
    assert shown(str(errors[0]), errors[0]).endswith("See docs/runbook.md#audit-unavailable")
    calls = failing.calls
    for n in range(3):
        with pytest.raises(AuditUnavailable):
            await writer.append([stop(10 + n)])
    assert failing.calls == calls  # nothing more was even tried
    assert writer.failure is not None
    await writer.aclose()


async def test_batches_queued_behind_a_failed_fsync_fail_and_are_not_written(
    tmp_path: Path,
) -> None:
    gated = GatedFsync()
    writer = make_writer(tmp_path, fsync=gated)
    errors: list[int] = []

    async def one(n: int) -> None:
        try:
            await writer.append([stop(n)])
        except AuditUnavailable:
            errors.append(n)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(one, 0)
                gate = await gated.receive.receive()  # batch 1 in its fsync
                for n in range(1, 4):
                    nursery.start_soon(one, n)  # batch 2, queued behind it
                await trio.testing.wait_all_tasks_blocked()
                gated.failing = True
                gated.released = True  # no more gates: a later fsync fails at once
                gate.set()
            finally:
                gated.release_all()
    assert sorted(errors) == [0, 1, 2, 3]
    assert gated.calls == 1  # batch 2 was never even written
    assert len(read_lines(tmp_path / "2026-11-29.jsonl")) == 1
    with pytest.raises(AuditUnavailable):
        await writer.append([stop(4)])
    await writer.aclose()
    assert len(read_lines(tmp_path / "2026-11-29.jsonl")) == 1


async def test_a_bug_while_writing_fails_every_waiter_instead_of_hanging(
    tmp_path: Path,
) -> None:
    def buggy_write(fd: int, data: bytes) -> int:
        raise RuntimeError("a bug")

    writer = make_writer(tmp_path, write=buggy_write)
    outcomes: list[str] = []

    async def one(n: int) -> None:
        try:
            await writer.append([stop(n)])
        except AuditUnavailable:
            outcomes.append("unavailable")
        except RuntimeError:
            outcomes.append("bug")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(one, n)
    assert sorted(outcomes) == ["bug", "unavailable", "unavailable"]
    with pytest.raises(AuditUnavailable, match="internal error"):
        await writer.append([stop(9)])
    await writer.aclose()


class FullDisk:
    """os.write that writes `room` bytes in all, then fails with ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __call__(self, fd: int, data: bytes) -> int:
        if self.room == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = os.write(fd, data[: self.room])
        self.room -= written
        return written


async def test_write_failure_is_sticky_and_the_partial_batch_is_not_reported(
    tmp_path: Path,
) -> None:
    writer = make_writer(tmp_path, write=FullDisk(room=150))
    records = await writer.append([stop(0)])
    line_length = len(read_lines(tmp_path / "2026-11-29.jsonl")[0])
    assert line_length + 1 < 150 < 2 * (line_length + 1)
    with pytest.raises(AuditUnavailable, match="No space left on device"):
        await writer.append([stop(1)])  # half written: a torn line
    with pytest.raises(AuditUnavailable):
        await writer.append([stop(2)])
    await writer.aclose()
    data = (tmp_path / "2026-11-29.jsonl").read_bytes()
    assert len(data) == 150 and not data.endswith(b"\n")
    assert records[0].seq == 0


async def test_batch_with_a_bad_event_leaves_the_chain_untouched(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    with pytest.raises(KeyError):  # our bug: not an event
        await writer.append([stop(0), object()])  # type: ignore[list-item]
    assert writer.next_seq == 0 and writer.head_hash == GENESIS_PREV
    records = await writer.append([stop(1)])
    await writer.aclose()
    assert records[0].seq == 0
    check_chain(read_lines(tmp_path / "2026-11-29.jsonl"))


async def test_no_fsync_mode_writes_without_fsync(tmp_path: Path) -> None:
    writer = make_writer(tmp_path, fsync=None)
    for n in range(5):
        await writer.append([stop(n)])
    await writer.aclose()
    check_chain(read_lines(tmp_path / "2026-11-29.jsonl"))


async def test_aclose_writes_what_was_queued_during_a_flush(tmp_path: Path) -> None:
    gated = GatedFsync()
    writer = make_writer(tmp_path, fsync=gated)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            try:
                nursery.start_soon(writer.append, [stop(0)])
                first = await gated.receive.receive()
                for n in range(1, 3):
                    nursery.start_soon(writer.append, [stop(n)])
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(writer.aclose)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(trio.ClosedResourceError):  # closing: no new appends
                    await writer.append([stop(9)])
                first.set()
                (await gated.receive.receive()).set()
            finally:
                gated.release_all()
    lines = read_lines(tmp_path / "2026-11-29.jsonl")
    assert len(lines) == 3
    check_chain(lines)


async def test_closed_writer_refuses(tmp_path: Path) -> None:
    async with make_writer(tmp_path) as writer:
        await writer.append([stop(0)])
    await writer.aclose()  # idempotent
    with pytest.raises(trio.ClosedResourceError):
        await writer.append([stop(0)])


async def test_lock_is_exclusive_and_the_file_stays(tmp_path: Path) -> None:
    dir_fd = open_audit_dir(tmp_path)
    lock_fd = lock_audit_dir(dir_fd)
    with pytest.raises(AuditLocked) as info:
        lock_audit_dir(dir_fd)  # a second open in the same process
    assert shown(str(info.value), info.value).endswith("See docs/runbook.md#audit-locked")
    os.close(lock_fd)
    assert (tmp_path / LOCK_NAME).exists()
    os.close(lock_audit_dir(dir_fd))  # free again once closed
    os.close(dir_fd)
    assert (tmp_path / LOCK_NAME).exists()


async def test_writer_close_releases_the_lock(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    with pytest.raises(AuditLocked):
        make_writer(tmp_path)
    await writer.aclose()
    await make_writer(tmp_path).aclose()
