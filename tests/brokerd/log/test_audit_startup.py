"""Start-up of the audit log: lock, verify, torn tail, accepted break."""

from __future__ import annotations

import errno
import hashlib
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio

from boxmaker._audit_files import verify_directory
from boxmaker._error_table import shown
from boxmaker.brokerd.log._audit_startup import StartupReport, open_audit_log
from boxmaker.brokerd.log._audit_writer import (
    AuditChainBroken,
    AuditError,
    AuditLocked,
    AuditUnavailable,
    AuditWriter,
    WriteFn,
    inline_fsync,
)
from boxmaker.proto._convert import U64, JsonObject
from boxmaker.proto.audit._audit import (
    GENESIS_PREV,
    Break,
    Call,
    GrantsSummary,
    Peer,
    Record,
    Recovery,
    Start,
    Stop,
    encode_record,
    line_hash,
    parse_record,
)
from boxmaker.proto.wire._wire import format_ts

NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)
TODAY = "2026-11-29.jsonl"
YESTERDAY = "2026-11-28.jsonl"
OWNER = 1000


def clock() -> datetime:
    return NOW


async def start(
    directory: Path, *, accept_break: bool = False, write: WriteFn = os.write
) -> tuple[AuditWriter, StartupReport]:
    return await open_audit_log(
        directory,
        accept_break=accept_break,
        by_uid=OWNER,
        clock=clock,
        fsync=inline_fsync,
        write=write,
    )


def start_event() -> Start:
    return Start(
        version="0.1.0",
        pid=U64(4242),
        grants=GrantsSummary(ok=True, count=U64(0), digest="0" * 64),
    )


def call(n: int) -> Call:
    return Call(
        session="c-test",
        tool="echo",
        args=JsonObject({"text": f"hello {n}"}),
        peer=Peer(uid=U64(1000), pid=U64(1)),
    )


async def write_log(directory: Path, count: int) -> list[Record]:
    """A valid log of `count` records, through the writer."""
    writer, _ = await start(directory)
    records = await writer.append([call(n) for n in range(count)])
    await writer.aclose()
    return records


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def assert_verifies(directory: Path) -> None:
    report = verify_directory(directory)
    assert report.ok, report.failures
    assert report.torn_tail is None


async def test_empty_directory_starts(tmp_path: Path) -> None:
    audit = tmp_path / "audit"  # missing: created
    writer, report = await start(audit)
    assert report.next_seq == 0 and report.head_hash == GENESIS_PREV
    assert report.chain.ok and report.chain.head is None
    assert report.recovery is None and report.break_record is None
    records = await writer.append([start_event()])
    await writer.aclose()
    assert records[0].seq == 0 and records[0].prev == GENESIS_PREV
    assert_verifies(audit)
    assert (audit / TODAY).exists() and (audit / ".lock").exists()


async def test_one_empty_file_starts(tmp_path: Path) -> None:
    (tmp_path / YESTERDAY).write_bytes(b"")
    writer, report = await start(tmp_path)
    assert report.next_seq == 0
    await writer.append([start_event()])
    await writer.aclose()
    assert (tmp_path / YESTERDAY).read_bytes() == b""
    assert len(lines_of(tmp_path / TODAY)) == 2
    assert_verifies(tmp_path)


async def test_many_empty_day_files_start_and_the_newest_is_used(tmp_path: Path) -> None:
    for name in ("2026-11-01.jsonl", YESTERDAY, "2026-12-01.jsonl"):  # one ahead of the clock
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "notes.jsonl").write_bytes(b"not the log\n")
    writer, report = await start(tmp_path)
    assert report.chain.ignored_files == ["notes.jsonl"]
    await writer.append([start_event()])
    await writer.aclose()
    assert len(lines_of(tmp_path / "2026-12-01.jsonl")) == 2  # never back to an earlier day
    assert not (tmp_path / TODAY).exists()
    assert_verifies(tmp_path)


async def test_restart_continues_the_chain(tmp_path: Path) -> None:
    records = await write_log(tmp_path, 3)
    writer, report = await start(tmp_path)
    assert report.next_seq == 3
    assert report.head_hash == line_hash(encode_record(records[-1]))
    more = await writer.append([start_event()])
    await writer.aclose()
    assert more[0].seq == 3
    assert_verifies(tmp_path)


async def test_on_record_sees_every_record_and_unfinished_calls_are_reported(
    tmp_path: Path,
) -> None:
    records = await write_log(tmp_path, 4)
    seen: list[Record] = []
    writer, report = await open_audit_log(
        tmp_path, by_uid=OWNER, clock=clock, fsync=inline_fsync, on_record=seen.append
    )
    await writer.aclose()
    assert seen == records
    assert report.unfinished_calls == []


async def test_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    writer, _ = await start(tmp_path)
    with pytest.raises(AuditLocked) as info:
        await start(tmp_path)
    assert shown(str(info.value), info.value).endswith("docs/runbook.md#audit-locked")
    await writer.append([start_event()])  # the first one is unharmed
    await writer.aclose()
    writer, _ = await start(tmp_path)  # released on close
    await writer.aclose()
    assert (tmp_path / ".lock").exists()


CHILD = """
import sys, trio
from boxmaker.brokerd.log._audit_startup import open_audit_log
from boxmaker.brokerd.log._audit_writer import AuditLocked
from boxmaker._error_table import shown

async def main():
    try:
        writer, _ = await open_audit_log(sys.argv[1], by_uid=0)
    except AuditLocked as exc:
        print(shown(str(exc), exc))
        sys.exit(3)
    await writer.aclose()

trio.run(main)
"""


async def test_second_writer_in_another_process_is_refused(tmp_path: Path) -> None:
    writer, _ = await start(tmp_path)
    with trio.fail_after(30):
        result = await trio.run_process(
            [sys.executable, "-c", CHILD, str(tmp_path)], capture_stdout=True, check=False
        )
    assert result.returncode == 3
    assert result.stdout.decode().strip().endswith("docs/runbook.md#audit-locked")
    await writer.aclose()
    with trio.fail_after(30):
        result = await trio.run_process(
            [sys.executable, "-c", CHILD, str(tmp_path)], capture_stdout=True, check=False
        )
    assert result.returncode == 0


async def test_torn_tail_is_recovered_in_its_own_file(tmp_path: Path) -> None:
    await write_log(tmp_path, 3)
    torn = b'{"seq":3,"ts":"2026-11-29T07:00:00.000000Z","prev":"ab'
    with open(tmp_path / TODAY, "ab") as f:
        f.write(torn)
    (tmp_path / "2026-11-30.jsonl").write_bytes(b"")  # a later, empty day file
    writer, report = await start(tmp_path)
    assert report.chain.torn_tail is not None
    recovery = report.recovery
    assert recovery is not None
    assert recovery.event == Recovery(
        file=TODAY, line=U64(4), bytes=U64(len(torn)), sha256=hashlib.sha256(torn).hexdigest()
    )
    assert recovery.seq == 3  # follows the last good record
    assert report.next_seq == 4
    started = await writer.append([start_event()])
    await writer.aclose()
    lines = lines_of(tmp_path / TODAY)
    assert lines[3] == torn  # ended with "\n" where it was
    assert parse_record(lines[4]) == recovery
    assert lines[5] == b""
    later = lines_of(tmp_path / "2026-11-30.jsonl")
    assert parse_record(later[0]) == started[0]  # the writer then goes on in the newest file
    report_after = verify_directory(tmp_path)
    assert report_after.ok and report_after.torn_tail is None
    assert [(r.file, r.line) for r in report_after.recovered] == [(TODAY, 4)]
    assert report_after.head is not None and report_after.head.seq == 4


async def test_torn_line_that_parses_is_still_torn(tmp_path: Path) -> None:
    records = await write_log(tmp_path, 2)
    whole = encode_record(
        Record(
            seq=2,
            ts=format_ts(NOW),
            prev=line_hash(encode_record(records[-1])),
            event=Stop(reason="x"),
        )
    )
    with open(tmp_path / TODAY, "ab") as f:
        f.write(whole)  # no newline
    writer, report = await start(tmp_path)
    assert report.recovery is not None and report.recovery.seq == 2
    await writer.aclose()
    assert_verifies(tmp_path)


async def test_only_a_torn_line(tmp_path: Path) -> None:
    (tmp_path / TODAY).write_bytes(b'{"se')
    writer, report = await start(tmp_path)
    assert report.recovery is not None
    assert report.recovery.seq == 0 and report.recovery.prev == GENESIS_PREV
    await writer.append([start_event()])
    await writer.aclose()
    assert_verifies(tmp_path)


def corrupt(path: Path, line: int) -> None:
    lines = lines_of(path)
    lines[line - 1] = lines[line - 1].replace(b"hello", b"jello")
    path.write_bytes(b"\n".join(lines))


async def test_broken_chain_refuses_to_start_and_writes_nothing(tmp_path: Path) -> None:
    await write_log(tmp_path, 5)
    corrupt(tmp_path / TODAY, 2)
    before = (tmp_path / TODAY).read_bytes()
    with pytest.raises(AuditChainBroken) as info:
        await start(tmp_path)
    message = shown(str(info.value), info.value)
    assert f"{TODAY} line 3" in message  # record 2's prev no longer matches line 2
    assert "hash_mismatch" in message
    assert message.endswith("See docs/runbook.md#audit-chain-broken")
    assert (tmp_path / TODAY).read_bytes() == before
    with pytest.raises(AuditChainBroken):  # the lock was released
        await start(tmp_path)


async def test_accept_break_writes_the_break_then_a_plain_start_serves(tmp_path: Path) -> None:
    await write_log(tmp_path, 5)
    corrupt(tmp_path / TODAY, 2)
    writer, report = await start(tmp_path, accept_break=True)
    brk = report.break_record
    assert brk is not None and isinstance(brk.event, Break)
    assert (brk.event.first.file, brk.event.first.line) == (TODAY, 3)
    assert brk.event.first.kind == "hash_mismatch"
    assert brk.event.failures == len(report.chain.failures) >= 1
    assert brk.event.by == OWNER
    assert brk.seq == 5  # counted from lines
    assert brk.prev == line_hash(lines_of(tmp_path / TODAY)[4])
    await writer.append([start_event()])
    await writer.aclose()
    after = verify_directory(tmp_path)
    assert after.ok and len(after.accepted_breaks) == 1
    writer, report = await start(tmp_path)  # plain start
    assert report.break_record is None and report.next_seq == 7
    await writer.append([start_event()])
    await writer.aclose()
    assert verify_directory(tmp_path).ok


async def test_accept_break_with_no_valid_record_counts_lines(tmp_path: Path) -> None:
    (tmp_path / YESTERDAY).write_bytes(b"garbage\nmore garbage\n")
    (tmp_path / TODAY).write_bytes(b"")
    writer, report = await start(tmp_path, accept_break=True)
    brk = report.break_record
    assert brk is not None
    assert brk.seq == 2 and brk.prev == line_hash(b"more garbage")
    assert isinstance(brk.event, Break) and brk.event.failures == 2
    await writer.append([start_event()])
    await writer.aclose()
    assert len(lines_of(tmp_path / TODAY)) == 3  # break + start, in the newest file
    assert verify_directory(tmp_path).ok


async def test_accept_break_on_a_sound_log_writes_no_break(tmp_path: Path) -> None:
    await write_log(tmp_path, 2)
    writer, report = await start(tmp_path, accept_break=True)
    await writer.aclose()
    assert report.break_record is None and report.next_seq == 2


async def test_accept_break_with_a_torn_tail_recovers_then_breaks(tmp_path: Path) -> None:
    await write_log(tmp_path, 4)
    corrupt(tmp_path / TODAY, 2)
    with open(tmp_path / TODAY, "ab") as f:
        f.write(b'{"seq":4,"ts"')
    writer, report = await start(tmp_path, accept_break=True)
    assert report.recovery is not None and report.break_record is not None
    assert report.break_record.seq == report.recovery.seq + 1
    await writer.append([start_event()])
    await writer.aclose()
    after = verify_directory(tmp_path)
    assert after.ok and after.torn_tail is None and len(after.recovered) == 1


class BrokenDisk:
    def __call__(self, fd: int, data: bytes) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))


async def test_failed_recovery_write_is_unavailable_and_releases_the_lock(
    tmp_path: Path,
) -> None:
    await write_log(tmp_path, 2)
    with open(tmp_path / TODAY, "ab") as f:
        f.write(b'{"seq":2')
    with pytest.raises(AuditUnavailable) as info:
        await start(tmp_path, write=BrokenDisk())
    assert shown(str(info.value), info.value).endswith("docs/runbook.md#audit-unavailable")
    writer, report = await start(tmp_path)  # lock released; recovery on a good disk
    assert report.recovery is not None
    await writer.aclose()
    assert_verifies(tmp_path)


def test_errors_share_one_base() -> None:
    for cls in (AuditLocked, AuditChainBroken, AuditUnavailable):
        assert issubclass(cls, AuditError)
