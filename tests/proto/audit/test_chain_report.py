"""The chain verifier's report (boxmaker.proto.audit._chain_report): 04-audit's JSON, and
the `recovery` and `break` events it calls for, accepted by the verifier."""

from __future__ import annotations

import json

import pytest

from boxmaker.proto._convert import unstructure
from boxmaker.proto.audit._audit import Record, encode_record
from boxmaker.proto.audit._chain_report import report_json
from tests.fakes.audit_log import valid_log, verify_data

REPORT_KEYS = ["ok", "files", "records", "head", "failures", "accepted_breaks", "recovered",
               "torn_tail", "unfinished_calls", "ignored_files"]


def test_valid_log_is_ok_and_the_report_has_exactly_the_spec_shape() -> None:
    builder = valid_log(6)
    report = verify_data(builder.data())
    assert report.ok
    assert report.files == 2
    assert report.records == sum(len(lines) for lines in builder.files.values())
    assert report.head is not None
    assert (report.head.seq, report.head.hash) == builder.head()
    assert report.head.file == "2026-11-05.jsonl"
    assert report.head.line == len(builder.files["2026-11-05.jsonl"])
    document = unstructure(report)
    assert list(document) == REPORT_KEYS
    assert list(document["head"]) == ["seq", "hash", "file", "line"]
    assert document["failures"] == []
    json.dumps(document)  # plain JSON values only


def test_recovery_from_the_report_is_accepted() -> None:
    """What brokerd's start-up builds from the report, the verifier accepts."""
    builder = valid_log(2, files=1)
    builder.torn()
    data = builder.data()
    report = verify_data(data)
    event = report.recovery_event()
    assert event is not None
    record = Record(seq=report.next_seq, ts=builder.ts(), prev=report.next_prev, event=event)
    data[report.torn_tail.file] += b"\n" + encode_record(record) + b"\n"  # type: ignore[union-attr]
    after = verify_data(data)
    assert after.ok and after.torn_tail is None and len(after.recovered) == 1


def test_break_from_the_report_is_accepted() -> None:
    builder = valid_log(2)
    lines = builder.files["2026-11-01.jsonl"]
    lines[1] = lines[1].replace(b"4242", b"4243")
    builder.garbage()
    data = builder.data()
    report = verify_data(data)
    assert not report.ok
    event = report.break_event(by=1000)
    assert event.failures == 2
    record = Record(seq=report.break_seq, ts=builder.ts(), prev=report.break_prev, event=event)
    data[builder.current] += encode_record(record) + b"\n"
    after = verify_data(data)
    assert after.ok, [f.detail for f in after.failures]
    assert after.head is not None and after.head.seq == report.break_seq


def test_the_json_hook_is_report_json() -> None:
    builder = valid_log(2)
    builder.garbage()
    report = verify_data(builder.data())
    assert unstructure(report) == report_json(report)
    assert report_json(report)["failures"][0] == {
        "kind": report.failures[0].kind, "file": report.failures[0].file,
        "line": report.failures[0].line, "seq": None, "expected": None, "found": None,
        "accepted": False,
    }


def test_a_report_without_failures_has_no_break_to_make() -> None:
    report = verify_data(valid_log(2).data())
    with pytest.raises(ValueError, match="no failure"):
        report.break_event(by=1000)
    assert report.recovery_event() is None
