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
from boxmaker.proto._taint import NEW_SESSION
from boxmaker.proto.audit._audit import (
    ApprovalRecord,
    BoundedCall,
    DecisionRecord,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    Peer,
    Record,
    Redecision,
    encode_record,
)
from boxmaker.proto.audit._audit_passkey import PasskeyRecord, PasskeyUse
from boxmaker.proto.audit._audit_scan import check_record_line


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


AGAIN = Redecision(outcome=OutcomeAllowed(), grant="g", state=NEW_SESSION)


def _log() -> list[Record]:
    """Calls, asks (one asked twice), approvals with and without a passkey, two keys."""
    ts = "2026-12-01T21:00:00.000000Z"
    events: list[object] = [
        PasskeyRecord(action="added", credential_id="AAAA", name="k", public_key="AQID",
                      by=U64(0)),
        PasskeyRecord(action="added", credential_id="BBBB", name="k2", public_key="BAUG",
                      by=U64(0)),
    ]
    for n in range(4):
        call = len(events)
        events.append(BoundedCall(session="c-1", tool="read_file",
                                  args={"path": f"/a/{n}", "note": '{"ask":1}'},
                                  peer=Peer(uid=1, pid=2), omitted=None))
        events.append(DecisionRecord(call=U64(call), outcome=OutcomeAsk(
            approval_id=U64(10 + n), expires_at=f"2026-12-01T21:0{n}:00.000000Z"),
            grant="g", state=NEW_SESSION, grants_digest="5e" * 32))
        if n == 1:  # asked again: the newer expiry counts
            events.append(DecisionRecord(call=U64(call), outcome=OutcomeAsk(
                approval_id=U64(10 + n), expires_at="2026-12-01T21:09:00.000000Z"),
                grant="g", state=NEW_SESSION, grants_digest="5e" * 32))
        if n == 2:
            events.append(DecisionRecord(call=U64(call), outcome=OutcomeDenied(
                code="no_grant", reason='no grant covers {"ask":'), grant=None,
                state=NEW_SESSION, grants_digest="5e" * 32))
        use = PasskeyUse(credential_id="AAAA" if n % 2 else "BBBB", sign_count=U64(n),
                         assertion_sha256=f"{n}" * 64) if n != 3 else None
        events.append(ApprovalRecord(call=U64(call), approval_id=U64(10 + n),
                                     verdict="approved", by=U64(0), reason=None,
                                     redecision=AGAIN, passkey=use))
    events.append(DecisionRecord(call=U64(2), outcome=OutcomeAllowed(), grant="g",
                                 state=NEW_SESSION, grants_digest="5e" * 32))
    events.append(ApprovalRecord(call=U64(99), approval_id=U64(1), verdict="approved",
                                 by=U64(0), reason=None, redecision=AGAIN,
                                 passkey=PasskeyUse(credential_id="CCCC", sign_count=U64(1),
                                                    assertion_sha256="9" * 64)))
    return [Record(seq=U64(seq), ts=ts, prev="0" * 64, event=event)  # type: ignore[arg-type]
            for seq, event in enumerate(events)]


def test_feed_line_keeps_what_feed_keeps() -> None:
    # bxctl audit verify feeds lines and parses only those that can matter (issue 23)
    by_record, by_line = KeptAssertions(), KeptAssertions()
    for record in _log():
        by_record.feed(record)
        line = encode_record(record)
        by_line.feed_line(line, check_record_line(line))
    assert by_line.approvals == by_record.approvals
    assert len(by_record.approvals) == 4
