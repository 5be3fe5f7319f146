"""`bxctl audit verify`'s reading of kept assertions (issue 22 item 4); the
whole command against a real brokerd's log is tests/integration/test_passkey_reverify.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker.bxctl._audit_assertions import (
    AssertionFinding,
    AssertionReport,
    KeptAssertions,
    _read,
    report_lines,
)
from boxmaker.proto._convert import U64
from boxmaker.proto.audit._audit import ApprovalRecord, Record
from boxmaker.proto.audit._audit_passkey import PasskeyUse


def test_read_refuses_links_fifos_and_big_files(tmp_path: Path) -> None:
    plain = tmp_path / "a.json"
    plain.write_bytes(b"{}")
    assert _read(plain, 10) == b"{}"
    with pytest.raises(ValueError, match="over"):
        _read(plain, 1)
    link = tmp_path / "l.json"
    link.symlink_to(plain)
    with pytest.raises(OSError):
        _read(link, 10)
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        _read(fifo, 10)


def test_an_approval_without_its_call_in_the_log_is_a_failure(tmp_path: Path) -> None:
    kept = KeptAssertions()
    use = PasskeyUse(credential_id="AAAA", sign_count=U64(1), assertion_sha256="0" * 64)
    kept.feed(Record(seq=4, ts="2026-12-01T21:00:00.000000Z", prev="0" * 64,
                     event=ApprovalRecord(call=U64(2), approval_id=U64(5), verdict="approved",
                                          by=U64(0), reason=None, redecision=None,
                                          passkey=use)))
    report = kept.check(tmp_path)
    assert report.total == 1 and "no call record" in report.failures[0].detail


def test_report_lines_escape_and_count() -> None:
    report = AssertionReport(total=2, failures=[AssertionFinding(seq=3, approval_id=9,
                                                                 detail="bad \x1b[2J")])
    lines = report_lines(report)
    assert "\x1b" not in lines[0] and lines[-1].startswith("assertions: 1 of 2")
    assert report_lines(AssertionReport()) == []
