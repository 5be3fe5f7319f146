"""A program for tests/reliability/test_writer_crash.py: open the audit log in
the directory given as its argument (start-up recovers whatever a kill left),
then append forever from several concurrent tasks with real fsync, printing
``ack <seq>`` for every record once its `append` returned.

Not a test module; run as ``python tests/reliability/audit_appender.py DIR``.
"""

from __future__ import annotations

import os
import sys

import trio

from boxmaker.brokerd._audit_startup import open_audit_log
from boxmaker.brokerd._audit_writer import AuditWriter
from boxmaker.proto._audit import Call, GrantsSummary, Peer, Start
from boxmaker.proto._convert import U64, JsonObject

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


async def main(directory: str) -> None:
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
    async with trio.open_nursery() as nursery:
        for task in range(TASKS):
            nursery.start_soon(_append_forever, writer, task)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
