"""Crash: an appender killed with SIGKILL at random points loses nothing it
acknowledged, and every start-up after a kill recovers a log that verifies.

The appender (`audit_appender.py`) runs start-up (lock, verify, recover), then
appends from several tasks with real fsync and prints ``ack <seq>`` after each
`append` returned.  The test kills it at a random moment, mostly a few
milliseconds into appending, sometimes during its start-up, and checks the log
before the next run recovers it.

A kill -9 does not tear a small write, so now and then the test also cuts the
newest file at a random byte after the last acknowledged record, as a power
cut could (nothing after the last fsync is promised): the next run's start-up
must then recover a torn tail.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from boxmaker._audit_files import verify_directory
from boxmaker.brokerd.log._audit_startup import open_audit_log
from boxmaker.brokerd.log._audit_writer import inline_fsync
from boxmaker.proto._errors import DecodeError
from boxmaker.proto.audit._audit import Record, is_day_file_name, parse_record

APPENDER = Path(__file__).with_name("audit_appender.py")
KILLS = 60


class Run:
    """One appender process and what it acknowledged."""

    def __init__(self) -> None:
        self.acked: list[int] = []
        self.started = trio.Event()
        self.first_ack = trio.Event()
        self.buffer = b""

    def take(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"started"):
                self.started.set()
            elif line.startswith(b"ack "):
                self.acked.append(int(line[4:]))
                self.first_ack.set()


async def run_and_kill(directory: Path, rng: random.Random, *, during_startup: bool) -> Run:
    run = Run()
    process = await trio.lowlevel.open_process(
        [sys.executable, str(APPENDER), str(directory)], stdout=subprocess.PIPE
    )
    assert process.stdout is not None

    async def read_all() -> None:
        assert process.stdout is not None
        while data := await process.stdout.receive_some():
            run.take(data)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all)
            if during_startup:
                # Anywhere from interpreter start to well into appending.
                await trio.sleep(rng.uniform(0.0, 0.4))
            else:
                await run.first_ack.wait()
                await trio.sleep(rng.uniform(0.0, 0.03))
            process.send_signal(signal.SIGKILL)
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL, "the appender died by itself"
    return run


def cut_after_acknowledged(directory: Path, last_acked: int, rng: random.Random) -> bool:
    """Cut the newest non-empty file at a random byte after the record
    `last_acked`, if it lies in that file and anything follows it.  True when
    the cut left a torn line."""
    files = sorted(p for p in directory.iterdir() if is_day_file_name(p.name) and p.stat().st_size)
    if not files:
        return False
    data = files[-1].read_bytes()
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        line = data[start:end]
        if line.endswith(b"\n"):
            try:
                record = parse_record(line)
            except DecodeError:
                record = None
            if record is not None and record.seq == last_acked:
                break
        end = start
    else:
        return False
    if end >= len(data) - 1:
        return False
    cut = rng.randrange(end + 1, len(data))
    with open(files[-1], "r+b") as f:
        f.truncate(cut)
    return data[cut - 1 : cut] != b"\n"


@pytest.mark.slow  # about 20 s; runs in the default suite
async def test_kill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    acked: set[int] = set()
    runs_with_acks = 0
    torn_cuts = 0
    with trio.fail_after(240):
        for kill in range(KILLS):
            run = await run_and_kill(tmp_path, rng, during_startup=kill % 5 == 4)
            acked.update(run.acked)
            runs_with_acks += bool(run.acked)
            # The log as the kill left it: no failure (a torn tail is allowed,
            # the next start-up recovers it), and every acknowledged record there.
            seqs: set[int] = set()

            def seen(record: Record, seqs: set[int] = seqs) -> None:
                seqs.add(record.seq)

            report = verify_directory(tmp_path, on_record=seen)
            assert report.ok, (seed, kill, report.failures)
            missing = acked - seqs
            assert not missing, (seed, kill, sorted(missing)[:10])
            if acked and kill % 3 == 1 and report.torn_tail is None:
                torn_cuts += cut_after_acknowledged(tmp_path, max(acked), rng)
    assert runs_with_acks >= KILLS * 3 // 4
    # A last start-up in this process: recovers, and the log verifies whole.
    writer, startup = await open_audit_log(tmp_path, by_uid=0, fsync=inline_fsync)
    await writer.aclose()
    final = verify_directory(tmp_path)
    assert final.ok and final.torn_tail is None, (seed, final.failures)
    assert final.head is not None and final.head.seq + 1 == startup.next_seq
    assert max(acked) <= final.head.seq
    # Every torn line (cut here, or left by a kill) was recovered exactly once.
    assert len(final.recovered) >= torn_cuts


async def test_a_full_disk_makes_the_log_unavailable_and_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    # A real write failure: the appender runs under RLIMIT_FSIZE.
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(APPENDER), str(tmp_path), "--fsize-limit", "20000"],
            capture_stdout=True,
        )
    lines = result.stdout.decode().splitlines()
    acked = {int(line[4:]) for line in lines if line.startswith("ack ")}
    failed = [line for line in lines if line.startswith("unavailable ")]
    refused = [line for line in lines if line.startswith("refused ")]
    assert len(failed) == 1 and "File too large" in failed[0]
    assert failed[0].endswith("See docs/runbook.md#audit-unavailable")
    assert len(refused) == 3  # sticky: nothing more is even tried
    assert len(acked) > 50 and max(acked) == len(acked) - 1
    files = [p for p in tmp_path.iterdir() if is_day_file_name(p.name)]
    assert sum(p.stat().st_size for p in files) == 20000  # filled up to the limit
    torn = not max(files).read_bytes().endswith(b"\n")  # a short write, cut mid-line
    # Start-up (no limit here) recovers whatever the failed write left.
    seqs: set[int] = set()
    writer, startup = await open_audit_log(
        tmp_path, by_uid=0, fsync=inline_fsync, on_record=lambda r: seqs.add(r.seq)
    )
    await writer.aclose()
    assert acked <= seqs
    final = verify_directory(tmp_path)
    assert final.ok and final.torn_tail is None
    assert startup.next_seq > max(acked)
    assert (startup.recovery is not None) == torn
