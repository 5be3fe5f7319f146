"""A program for tests/reliability/test_writer_crash.py: open the audit log in
the directory given as its argument (start-up recovers whatever a kill left),
then append forever from several concurrent tasks with real fsync, printing
``ack <seq>`` for every record once its `append` returned.

With ``--fsize-limit BYTES`` it runs under that ``RLIMIT_FSIZE`` (a disk
that fills up: writes past the limit fail with EFBIG), prints
``unavailable <message>`` when an append fails, tries three more appends
(printing ``refused <message>`` for each that is refused) and exits.

Not a test module; run as ``python tests/reliability/audit_appender.py DIR``.
"""

from __future__ import annotations

import os
import resource
import signal
import sys

import trio

from boxmaker._error_table import shown
from boxmaker.brokerd.log._audit_startup import open_audit_log
from boxmaker.brokerd.log._audit_writer import AuditUnavailable, AuditWriter
from boxmaker.proto._convert import U64, JsonObject
from boxmaker.proto.audit._audit import Call, GrantsSummary, Peer, Start

TASKS = 4


def _call(task: int, n: int) -> Call:
    return Call(
        session=f"c-crash-{task}",
        tool="echo",
        args=JsonObject({"text": f"call {n} of task {task}"}),
        peer=Peer(uid=U64(os.getuid()), pid=U64(os.getpid())),
    )


def _ack(seqs: list[int]) -> None:
    sys.stdout.write("".join(f"ack {seq}\n" for seq in seqs))
    sys.stdout.flush()


async def _append_forever(writer: AuditWriter, task: int) -> None:
    n = 0
    while True:
        size = 1 + (n + task) % 3  # batches of 1..3 records
        records = await writer.append([_call(task, n + i) for i in range(size)])
        n += size
        _ack([record.seq for record in records])


async def _until_unavailable(writer: AuditWriter) -> None:
    n = 0
    while True:
        try:
            records = await writer.append([_call(0, n), _call(0, n + 1)])
        except AuditUnavailable as exc:
            sys.stdout.write(f"unavailable {shown(str(exc), exc)}\n")
            break
        n += 2
        _ack([record.seq for record in records])
    for _ in range(3):
        try:
            records = await writer.append([_call(0, n)])
        except AuditUnavailable as exc:
            sys.stdout.write(f"refused {exc}\n")
        else:
            _ack([record.seq for record in records])
    await writer.aclose()


async def main(directory: str, fsize_limit: int | None) -> None:
    if fsize_limit is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, hard))
    writer, report = await open_audit_log(directory, by_uid=os.getuid())
    sys.stdout.write(
        f"started next_seq={report.next_seq} recovered={report.recovery is not None}\n"
    )
    records = await writer.append(
        [
            Start(
                version="test",
                pid=U64(os.getpid()),
                grants=GrantsSummary(ok=True, count=U64(0), digest="0" * 64),
            )
        ]
    )
    _ack([record.seq for record in records])
    if fsize_limit is not None:
        await _until_unavailable(writer)
        return
    async with trio.open_nursery() as nursery:
        for task in range(TASKS):
            nursery.start_soon(_append_forever, writer, task)


if __name__ == "__main__":
    limit = int(sys.argv[3]) if sys.argv[2:3] == ["--fsize-limit"] else None
    trio.run(main, sys.argv[1], limit)
