"""What raised each session's taint (boxmaker/approvals/_history.py), read from
real day files as they grow: a cause only when the taint changed, forgotten at
a declassify, bounded per session and in sessions."""

from __future__ import annotations

from pathlib import Path

from boxmaker.approvals._history import KEEP, MAX_SESSIONS, LogTail, TaintHistory
from boxmaker.proto._convert import U64
from boxmaker.proto._taint import Taint
from boxmaker.proto.audit._audit import Call, Declassify, Peer, Record, ResultRecord, encode_record

PEER = Peer(uid=U64(1), pid=U64(2))


def line(seq: int, event: object) -> bytes:
    return encode_record(Record(seq=seq, ts="2026-11-29T07:00:00.000000Z", prev="0" * 64,
                                event=event)) + b"\n"  # type: ignore[arg-type]


class Log:
    def __init__(self) -> None:
        self.seq = 0
        self.lines: list[bytes] = []

    def add(self, event: object) -> int:
        self.seq += 1
        self.lines.append(line(self.seq, event))
        return self.seq

    def call(self, session: str, tool: str, state: Taint, label: str = "private",
             untrusted: bool = False) -> None:
        call = self.add(Call(session=session, tool=tool, args={}, peer=PEER))
        self.add(ResultRecord(call=U64(call), status="ok", label=label,  # type: ignore[arg-type]
                              untrusted=untrusted, state=state, output=None))


PRIVATE = Taint(label="private", untrusted=False)
SECRET = Taint(label="secret", untrusted=True)


def test_a_cause_only_when_the_taint_changed() -> None:
    log = Log()
    log.call("s-1", "read_file", PRIVATE)
    log.call("s-1", "list_dir", PRIVATE)  # no change: not a cause
    log.call("s-1", "http_fetch", SECRET, "secret", True)
    history = TaintHistory()
    for raw in log.lines:
        history.feed(raw.rstrip(b"\n"))
    causes = history.of("s-1")
    assert [(c.tool, c.label, c.untrusted) for c in causes] == [
        ("read_file", "private", False), ("http_fetch", "secret", True)]
    assert [c.seq for c in causes] == [2, 6]
    assert history.of("s-2") == []


def test_lines_that_are_not_records_are_passed_over() -> None:
    history = TaintHistory()
    for raw in (b"", b"garbage", b'{"seq":1}', line(1, ResultRecord(
            call=U64(99), status="ok", label="secret", untrusted=True, state=SECRET,
            output=None)).rstrip(b"\n")):
        history.feed(raw)
    assert history.causes == {}


def test_bounded_per_session_and_in_sessions() -> None:
    history = TaintHistory()
    log = Log()
    labels = ["public", "private"]
    for index in range(KEEP + 5):  # each call flips the taint
        label = labels[index % 2]
        log.call("s-1", f"tool{index}", Taint(label=label, untrusted=False),  # type: ignore[arg-type]
                 label)
    for index in range(MAX_SESSIONS + 10):
        log.call(f"x-{index}", "read_file", PRIVATE)
    for raw in log.lines:
        history.feed(raw.rstrip(b"\n"))
    assert len(history.causes) == MAX_SESSIONS
    assert history.of("s-1") == []  # the oldest session went first
    assert history.of(f"x-{MAX_SESSIONS + 9}") != []


def test_keep_the_newest_causes() -> None:
    history = TaintHistory()
    log = Log()
    for index in range(KEEP + 3):
        label = ["public", "private"][index % 2]
        log.call("s-1", f"tool{index}", Taint(label=label, untrusted=False), label)  # type: ignore[arg-type]
    for raw in log.lines:
        history.feed(raw.rstrip(b"\n"))
    causes = history.of("s-1")
    assert len(causes) == KEEP
    assert causes[-1].tool == f"tool{KEEP + 2}"


def test_log_tail_reads_only_what_was_appended_across_files(tmp_path: Path) -> None:
    log = Log()
    log.call("s-1", "read_file", PRIVATE)
    audit = tmp_path / "audit"
    audit.mkdir()
    first = audit / "2026-11-28.jsonl"
    first.write_bytes(b"".join(log.lines))
    history = TaintHistory()
    tail = LogTail(audit, history)
    tail.poll()
    tail.poll()  # nothing new: nothing fed twice
    assert len(history.of("s-1")) == 1
    log.lines.clear()
    log.call("s-1", "http_fetch", SECRET, "secret", True)
    data = b"".join(log.lines)
    second = audit / "2026-11-29.jsonl"
    second.write_bytes(data[:10])  # half a line
    (audit / "notes.txt").write_bytes(b"ignored")
    tail.poll()
    assert len(history.of("s-1")) == 1
    with second.open("ab") as handle:
        handle.write(data[10:])
    tail.poll()
    assert [c.tool for c in history.of("s-1")] == ["read_file", "http_fetch"]
    log.lines.clear()
    log.add(Declassify(session="s-1", from_=SECRET, to=Taint(label="public", untrusted=False),
                       by=U64(1), reason="done"))
    with second.open("ab") as handle:
        handle.write(b"".join(log.lines))
    tail.poll()
    assert history.of("s-1") == []


def test_a_missing_directory_is_nothing_to_read(tmp_path: Path) -> None:
    history = TaintHistory()
    LogTail(tmp_path / "absent", history).poll()
    assert history.causes == {}
