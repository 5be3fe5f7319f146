"""The chain verifier: every rule of 04-audit "Verifier", and every damage caught."""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxmaker.proto._convert import unstructure
from boxmaker.proto.audit._audit import (
    ApprovalRecord,
    Call,
    OutcomeAllowed,
    Record,
    Recovery,
    Redecision,
    ResultRecord,
    Stop,
    encode_record,
    line_hash,
    parse_record,
)
from boxmaker.proto.audit._chain_report import ChainReport
from boxmaker.proto.audit._verify import ChainVerifier
from tests.fakes.audit_log import PUBLIC, LogBuilder, valid_log, verify_data

REPORT_KEYS = ["ok", "files", "records", "head", "failures", "accepted_breaks", "recovered",
               "torn_tail", "unfinished_calls", "ignored_files"]


def kinds(report: ChainReport) -> list[str]:
    return [f.kind for f in report.failures]


# -- valid logs -----------------------------------------------------------------


def test_empty_directory_empty_files_are_ok() -> None:
    for data in [{}, {"2026-11-01.jsonl": b""},
                 {"2026-11-01.jsonl": b"", "2026-11-02.jsonl": b"", "2026-11-03.jsonl": b""}]:
        report = verify_data(data)
        assert report.ok
        assert report.records == 0
        assert report.head is None
        assert report.files == len(data)
        assert report.torn_tail is None
        assert (report.next_seq, report.next_prev) == (0, "0" * 64)


def test_other_jsonl_files_are_listed_not_read() -> None:
    builder = valid_log(2, files=1)
    data = builder.data()
    data["notes.jsonl"] = b"anything at all\n"
    data["2026-13-01.jsonl"] = b"{}\n"
    data["2026-11-00.jsonl"] = b"\n"
    report = verify_data(data)
    assert report.ok
    assert report.ignored_files == ["2026-11-00.jsonl", "2026-13-01.jsonl", "notes.jsonl"]
    assert report.files == 1


def test_files_must_come_in_name_order() -> None:
    verifier = ChainVerifier()
    assert verifier.begin_file("2026-11-02.jsonl")
    verifier.end_file()
    with pytest.raises(ValueError):
        verifier.begin_file("2026-11-01.jsonl")


def test_unfinished_calls_are_reported_not_failures() -> None:
    builder = LogBuilder()
    builder.start()
    running = builder.call(result=False)
    builder.call(allowed=False)  # denied: never runs
    asked = builder.ask()  # waits for approval: not running
    builder.call()
    approved = builder.ask()
    builder.add(ApprovalRecord(call=approved, approval_id=482913, verdict="approved", by=1000,
                               reason=None, redecision=Redecision(
                                   outcome=OutcomeAllowed(), grant="g", state=PUBLIC)))
    report = verify_data(builder.data())
    assert report.ok
    assert report.unfinished_calls == [running, approved]
    assert asked not in report.unfinished_calls
    builder.add(ResultRecord(call=approved, status="ok", label="public", untrusted=False,
                             state=PUBLIC, output=None))
    assert verify_data(builder.data()).unfinished_calls == [running]


def test_on_record_sees_every_record_of_the_chain() -> None:
    builder = valid_log(3, files=1)
    seen: list[Record] = []
    verify_data(builder.data(), on_record=seen.append)
    assert [r.seq for r in seen] == list(range(builder.seq + 1))
    assert isinstance(seen[1].event, Call)


# -- failures ----------------------------------------------------------------------


def test_hash_mismatch_says_expected_and_found() -> None:
    builder = valid_log(3, files=1)
    lines = builder.files[builder.current]
    lines[1] = lines[1].replace(b"/home/me/notes", b"/home/me/Notes")
    report = verify_data(builder.data())
    assert kinds(report) == ["hash_mismatch"]
    failure = report.failures[0]
    assert failure.line == 3
    assert failure.seq == 2
    assert failure.found == parse_record(lines[2]).prev
    assert failure.expected == hashlib.sha256(lines[1][:-1]).hexdigest()
    assert failure.expected in failure.detail and failure.found in failure.detail
    assert not failure.accepted


def test_seq_gap_and_bad_json_and_bad_record() -> None:
    builder = valid_log(3, files=1)
    lines = builder.files[builder.current]
    del lines[3]
    report = verify_data(builder.data())
    assert kinds(report) == ["seq_gap"]
    assert "expected seq 3, found 4" in report.failures[0].detail
    assert report.failures[0].expected is None and report.failures[0].found is None

    builder = valid_log(3, files=1)
    builder.files[builder.current][2] = b'{"seq":2}\n'
    builder.files[builder.current][4] = b'{"seq":\n'
    report = verify_data(builder.data())
    # line 5 was a call: its decision (line 6) now names no call record
    assert kinds(report) == ["bad_record", "bad_json", "bad_reference"]
    assert [f.seq for f in report.failures] == [None, None, 5]
    assert [f.region for f in report.failures] == [1, 2, 2]
    assert report.regions == 2


def test_bad_reference() -> None:
    builder = LogBuilder()
    builder.start()
    builder.add(ResultRecord(call=0, status="ok", label="public", untrusted=False, state=PUBLIC,
                             output=None))  # seq 0 is a start, not a call
    builder.add(ResultRecord(call=99, status="ok", label="public", untrusted=False, state=PUBLIC,
                             output=None))
    report = verify_data(builder.data())
    assert kinds(report) == ["bad_reference", "bad_reference"]
    assert report.failures[1].seq == 2


def test_missing_newline_in_an_older_file() -> None:
    builder = valid_log(2, files=1)
    builder.torn()
    builder.new_file("2026-11-30.jsonl")
    builder.garbage(b"")  # any line in a later file
    report = verify_data(builder.data())
    assert kinds(report)[0] == "missing_newline"
    assert report.torn_tail is None


def test_resync_reports_every_broken_region() -> None:
    builder = valid_log(2, files=1)
    builder.garbage()
    builder.garbage(b"{}")
    builder.call()
    builder.garbage()
    builder.call()
    report = verify_data(builder.data())
    assert kinds(report) == ["bad_json", "bad_record", "bad_json"]
    assert [f.region for f in report.failures] == [1, 1, 2]
    assert report.regions == 2
    assert not report.ok
    # The chain after each region was checked: a later hash mismatch is found.
    lines = builder.files[builder.current]
    lines[-3] = lines[-3].replace(b"/home/me", b"/home/my")
    assert kinds(verify_data(builder.data()))[-1] == "hash_mismatch"


# -- torn tail and recovery ------------------------------------------------------------


def test_torn_tail_is_reported_not_failed() -> None:
    builder = valid_log(2, files=1)
    raw = builder.torn()
    data = builder.data()
    data["2026-11-30.jsonl"] = b""  # an empty later file: still the newest non-empty
    report = verify_data(data)
    assert report.ok
    assert report.torn_tail is not None
    assert (report.torn_tail.file, report.torn_tail.bytes) == ("2026-11-01.jsonl", len(raw))
    assert report.torn_tail.line == len(builder.files[builder.current])
    assert unstructure(report)["torn_tail"] == {"file": "2026-11-01.jsonl",
                                                "line": report.torn_tail.line,
                                                "bytes": len(raw)}
    assert (report.head.seq, report.head.hash) == builder.head()  # type: ignore[union-attr]


def test_a_torn_line_that_parses_is_still_torn_and_recovers() -> None:
    builder = valid_log(2, files=1)
    whole = encode_record(Record(seq=builder.seq + 1, ts=builder.ts(),
                                 prev=builder.last_record_hash, event=Stop(reason="x")))
    builder.torn(whole)
    torn_line = len(builder.files[builder.current])
    report = verify_data(builder.data())
    assert report.torn_tail is not None
    assert report.records == builder.seq + 1
    builder.recover()
    builder.call()
    report = verify_data(builder.data())
    assert report.ok, report.failures
    assert report.torn_tail is None
    assert [(r.file, r.line) for r in report.recovered] == [("2026-11-01.jsonl", torn_line)]


@pytest.mark.parametrize("damage", ["sha", "bytes", "line", "file", "first", "seq"])
def test_bad_recovery(damage: str) -> None:
    builder = valid_log(2, files=1)
    if damage == "first":
        builder.new_file("2026-11-30.jsonl")  # a recovery with no line before it in its file
        lines = builder.files[builder.current]
        builder.add(Recovery(file=builder.current, line=0, bytes=0, sha256="0" * 64))
        report = verify_data(builder.data())
        assert kinds(report) == ["bad_recovery"]
        return
    raw = builder.torn()
    builder.recover()
    lines = builder.files[builder.current]
    record = parse_record(lines[-1])
    event = record.event
    assert isinstance(event, Recovery)
    changes: dict[str, Any] = {
        "sha": {"sha256": "1" * 64}, "bytes": {"bytes": len(raw) + 1},
        "line": {"line": event.line - 1}, "file": {"file": "2026-11-02.jsonl"},
    }
    if damage == "seq":
        new = attrs.evolve(record, seq=record.seq + 1)
        lines[-1] = encode_record(new) + b"\n"
        assert kinds(verify_data(builder.data())) == ["seq_gap"]
        return
    new = attrs.evolve(record, event=attrs.evolve(event, **changes[damage]))
    lines[-1] = encode_record(new) + b"\n"
    report = verify_data(builder.data())
    assert kinds(report)[-1] == "bad_recovery"
    assert not report.ok


# -- breaks ------------------------------------------------------------------------------


def test_accepted_break_covers_every_failure_before_it() -> None:
    builder = valid_log(2, files=1)
    builder.garbage()
    first = (builder.current, len(builder.files[builder.current]), "bad_json")
    builder.call()
    lines = builder.files[builder.current]
    lines.insert(len(lines) - 1, b"also not a record\n")
    builder.total_lines += 1
    report = verify_data(builder.data())
    assert kinds(report) == ["bad_json", "bad_json"]
    # the second garbage line sits before the last record: the chain resyncs on it
    builder.accept_break(first, 2)
    builder.call()
    report = verify_data(builder.data())
    assert report.ok, [f.detail for f in report.failures]
    assert [f.accepted for f in report.failures] == [True, True]
    (accepted,) = report.accepted_breaks
    assert (accepted.first.file, accepted.first.line, accepted.first.kind) == first
    assert accepted.failures == 2
    assert unstructure(report)["accepted_breaks"][0]["first"] == {
        "file": first[0], "line": first[1], "kind": "bad_json"}


def test_break_after_trailing_garbage_counts_lines() -> None:
    builder = valid_log(2, files=1)
    builder.garbage()
    builder.garbage(b"[]")
    first = (builder.current, len(builder.files[builder.current]) - 1, "bad_json")
    report = verify_data(builder.data())
    assert report.break_seq == builder.seq + 3
    assert report.break_prev == line_hash(b"[]")
    builder.accept_break(first, 2)
    report = verify_data(builder.data())
    assert report.ok, [f.detail for f in report.failures]


def test_break_with_no_record_before_it() -> None:
    builder = LogBuilder()
    builder.garbage()
    builder.garbage()
    builder.accept_break((builder.current, 1, "bad_json"), 2)
    report = verify_data(builder.data())
    assert report.ok, [f.detail for f in report.failures]
    assert report.head is not None and report.head.seq == 2


@pytest.mark.parametrize("damage", ["count", "first", "seq", "prev", "nothing_to_accept"])
def test_bad_break(damage: str) -> None:
    builder = valid_log(2, files=1)
    if damage != "nothing_to_accept":
        builder.garbage()
    first = (builder.current, len(builder.files[builder.current]), "bad_json")
    count = 1
    if damage == "count":
        count = 2
    elif damage == "first":
        first = (first[0], first[1] - 1, "bad_json")
    builder.accept_break(first, count)
    lines = builder.files[builder.current]
    record = parse_record(lines[-1])
    if damage == "seq":
        lines[-1] = encode_record(attrs.evolve(record, seq=record.seq + 1)) + b"\n"
    elif damage == "prev":
        lines[-1] = encode_record(attrs.evolve(record, prev="1" * 64)) + b"\n"
    report = verify_data(builder.data())
    assert kinds(report)[-1] == "bad_break"
    assert not report.ok
    assert report.accepted_breaks == []


# -- expect_head ----------------------------------------------------------------------------


def test_expect_head() -> None:
    builder = valid_log(3)
    data = builder.data()
    head = builder.head()
    assert verify_data(data, expect_head=head).ok
    # a head saved earlier, still in the chain
    earlier = parse_record(builder.files["2026-11-01.jsonl"][3])
    earlier_hash = line_hash(builder.files["2026-11-01.jsonl"][3])
    assert verify_data(data, expect_head=(earlier.seq, earlier_hash)).ok
    # wrong hash
    report = verify_data(data, expect_head=(head[0], "1" * 64))
    assert kinds(report) == ["head_mismatch"]
    assert report.failures[0].expected == "1" * 64
    assert report.failures[0].found == head[1]
    # rolled back: the last record cut off
    lines = builder.files[builder.current]
    cut = dict(data)
    cut[builder.current] = b"".join(lines[:-1])
    assert verify_data(cut).ok
    report = verify_data(cut, expect_head=head)
    assert kinds(report) == ["head_mismatch"]
    assert report.failures[0].found is None
    # a failure before the saved head, even an accepted one
    builder.garbage()
    builder.accept_break((builder.current, len(lines), "bad_json"), 1)
    report = verify_data(builder.data(), expect_head=builder.head())
    assert kinds(report) == ["bad_json", "head_mismatch"]
    assert not report.ok
    # on an empty log
    report = verify_data({}, expect_head=(0, "0" * 64))
    assert kinds(report) == ["head_mismatch"]
    assert report.failures[0].file is None


# -- every damage is caught -----------------------------------------------------------------


def damaged_log() -> LogBuilder:
    """Small but with every shape: two files, an ask, a recovered torn line."""
    builder = valid_log(4, files=2)
    builder.torn()
    builder.recover()
    builder.call()
    return builder


def newest_nonempty(data: dict[str, bytes]) -> str | None:
    names = [name for name in sorted(data) if data[name]]
    return names[-1] if names else None


def is_torn(data: dict[str, bytes]) -> bool:
    name = newest_nonempty(data)
    return name is not None and not data[name].endswith(b"\n")


def check_damage(original: LogBuilder, data: dict[str, bytes], *, undetectable: bool) -> None:
    """The rule of 09-operations: detected as a failure, or reported as a torn
    tail exactly when it is one; with --expect-head always caught."""
    report = verify_data(data)
    assert (report.torn_tail is not None) == is_torn(data)
    if not undetectable and not is_torn(data):
        assert not report.ok, data
    with_head = verify_data(data, expect_head=original.head())
    assert not with_head.ok
    assert "head_mismatch" in kinds(with_head) or any(not f.accepted for f in with_head.failures)


def last_line_range(data: dict[str, bytes]) -> tuple[str, int, int]:
    name = newest_nonempty(data)
    assert name is not None
    raw = data[name]
    start = raw.rstrip(b"\n").rfind(b"\n") + 1
    return name, start, len(raw)


REPLACEMENTS = [lambda b: b ^ 0x01, lambda b: 0x0A if b != 0x0A else 0x20,
                lambda b: 0x22 if b != 0x22 else 0x27]


def test_every_single_byte_change_is_caught() -> None:
    builder = damaged_log()
    data = builder.data()
    newest, start, end = last_line_range(data)
    assert verify_data(data).ok
    changes = 0
    for name in sorted(data):
        raw = data[name]
        for offset in range(len(raw)):
            # every offset; the replacement byte cycles (a flipped bit, a
            # newline, a quote) to keep the run short
            for replace in (REPLACEMENTS[offset % len(REPLACEMENTS)],):
                mutated = bytearray(raw)
                mutated[offset] = replace(raw[offset])
                if bytes(mutated) == raw:
                    continue
                changed = dict(data)
                changed[name] = bytes(mutated)
                inside_newest = name == newest and start <= offset < end
                check_damage(builder, changed, undetectable=inside_newest)
                changes += 1
    assert changes > 1000


def split_lines(raw: bytes) -> list[bytes]:
    return raw.splitlines(keepends=True) if raw else []


def all_lines(data: dict[str, bytes]) -> list[tuple[str, int]]:
    return [(name, index) for name in sorted(data) for index in range(len(split_lines(data[name])))]


def with_lines(data: dict[str, bytes], name: str, lines: list[bytes]) -> dict[str, bytes]:
    changed = dict(data)
    changed[name] = b"".join(lines)
    return changed


def test_every_line_deletion_duplication_and_insertion_is_caught() -> None:
    builder = damaged_log()
    data = builder.data()
    positions = all_lines(data)
    newest = newest_nonempty(data)
    for name, index in positions:
        lines = split_lines(data[name])
        last = name == newest and index == len(lines) - 1
        deleted = lines[:index] + lines[index + 1:]
        check_damage(builder, with_lines(data, name, deleted), undetectable=last)
        duplicated = lines[:index + 1] + lines[index:]
        check_damage(builder, with_lines(data, name, duplicated), undetectable=False)
        for inserted in (b"garbage\n", b"{}\n", lines[index - 1] if index else b"\n"):
            grown = [*lines[:index], inserted, *lines[index:]]
            check_damage(builder, with_lines(data, name, grown), undetectable=False)


def test_every_swap_of_two_lines_is_caught() -> None:
    builder = damaged_log()
    data = builder.data()
    flat = [(name, line) for name in sorted(data) for line in split_lines(data[name])]
    for i in range(len(flat)):
        for j in range(i + 1, len(flat)):
            if flat[i][1] == flat[j][1]:
                continue
            swapped = list(flat)
            swapped[i] = (flat[i][0], flat[j][1])
            swapped[j] = (flat[j][0], flat[i][1])
            changed = {name: b"".join(line for n, line in swapped if n == name) for name in data}
            check_damage(builder, changed, undetectable=False)


def test_every_truncation_is_caught() -> None:
    builder = damaged_log()
    data = builder.data()
    names = sorted(data)
    total = sum(len(data[name]) for name in names)
    for cut in range(total):
        changed: dict[str, bytes] = {}
        remaining = cut
        for name in names:
            raw = data[name]
            changed[name] = raw[:remaining]
            remaining = max(0, remaining - len(raw))
        clean = not is_torn(changed)
        check_damage(builder, changed, undetectable=clean)
        if not clean:
            assert verify_data(changed).torn_tail is not None


@st.composite
def logs(draw: st.DrawFn) -> LogBuilder:
    builder = LogBuilder("2026-10-31.jsonl")
    builder.start()
    days = 0
    for step in draw(st.lists(st.sampled_from(["call", "denied", "ask", "day", "torn", "stop"]),
                              min_size=1, max_size=10)):
        if step == "call":
            builder.call()
        elif step == "denied":
            builder.call(allowed=False)
        elif step == "ask":
            builder.ask()
        elif step == "day":
            days += 1
            builder.new_file(f"2026-11-{days:02d}.jsonl")
        elif step == "torn":
            builder.torn()
            builder.recover()
        else:
            builder.stop()
    builder.call()
    return builder


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.data())
def test_random_logs_random_damage(builder: LogBuilder, data: st.DataObject) -> None:
    log = builder.data()
    assert verify_data(log).ok
    assert verify_data(log, expect_head=builder.head()).ok
    name = data.draw(st.sampled_from([n for n in sorted(log) if log[n]]))
    raw = log[name]
    offset = data.draw(st.integers(0, len(raw) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[offset]))
    changed = dict(log)
    changed[name] = raw[:offset] + bytes([value]) + raw[offset + 1:]
    newest, start, end = last_line_range(log)
    check_damage(builder, changed, undetectable=name == newest and start <= offset < end)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["call", "garbage", "empty-line", "break", "day", "torn"]),
                max_size=14))
def test_random_logs_with_accepted_breaks(steps: list[str]) -> None:
    """Breaks written by the spec's rule (the builder) are accepted wherever they fall."""
    builder = LogBuilder("2026-10-31.jsonl")
    open_failures: list[tuple[str, int, str]] = []
    days = 0
    for step in steps:
        if step == "call":
            builder.call()
        elif step in ("garbage", "empty-line"):
            builder.garbage(b"" if step == "empty-line" else b"{not json")
            open_failures.append((builder.current, len(builder.files[builder.current]),
                                  "bad_json"))
        elif step == "break" and open_failures:
            builder.accept_break(open_failures[0], len(open_failures))
            open_failures = []
        elif step == "day":
            days += 1
            builder.new_file(f"2026-11-{days:02d}.jsonl")
        elif step == "torn":
            builder.torn()
            builder.recover()
    if open_failures:
        builder.accept_break(open_failures[0], len(open_failures))
    report = verify_data(builder.data())
    assert report.ok, [(f.kind, f.file, f.line, f.detail) for f in report.failures]
    assert all(f.accepted for f in report.failures)
    if builder.seq >= 0:
        assert report.head is not None
        assert (report.head.seq, report.head.hash) == builder.head()


# -- abandoned asks (issue 22 item 15) ---------------------------------------------------


@pytest.mark.parametrize(("by", "redecision", "ok"), [
    (None, False, True), (1000, False, False), (None, True, False), (0, False, False)])
def test_an_abandoned_approval_names_nobody_and_carries_no_redecision(
        by: int | None, redecision: bool, ok: bool) -> None:
    builder = valid_log(1, files=1)
    call = builder.ask()
    builder.add(ApprovalRecord(
        call=call, approval_id=482913, verdict="abandoned", by=by,
        reason="brokerd stopped before the ask was answered",
        redecision=Redecision(outcome=OutcomeAllowed(), grant="docs", state=PUBLIC)
        if redecision else None))
    line = builder.files[builder.current][-1]
    report = verify_data(builder.data())
    assert report.ok is ok, [f.detail for f in report.failures]
    if ok:
        record = parse_record(line.rstrip(b"\n"))
        assert isinstance(record.event, ApprovalRecord)
        assert record.event.verdict == "abandoned" and record.event.by is None
        assert call not in report.unfinished_calls
    else:
        assert kinds(report) == ["bad_record"]
