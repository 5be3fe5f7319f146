"""The audit records of passkey-signed approvals (11-approvals-web), in their one form."""

from __future__ import annotations

import pytest

from boxmaker.proto._convert import U64
from boxmaker.proto.audit._audit import (
    ApprovalRecord,
    Record,
    RecordSchemaError,
    encode_record,
    parse_record,
)
from boxmaker.proto.audit._audit_passkey import ApprovalAttempt, PasskeyRecord, PasskeyUse
from boxmaker.proto.audit._audit_scan import _scan, check_record_line

TS = "2026-11-29T07:00:00.000000Z"
PREV = "ab" * 32
OLD_APPROVAL = (b'{"seq":9,"ts":"' + TS.encode() + b'","prev":"' + PREV.encode()
                + b'","approval":{"call":4,"approval_id":482913,"verdict":"refused","by":1000,'
                b'"reason":null,"redecision":null}}')


def line(event: object, seq: int = 9) -> bytes:
    return encode_record(Record(seq=seq, ts=TS, prev=PREV, event=event))  # type: ignore[arg-type]


def test_an_approval_without_a_passkey_is_written_as_older_records_were() -> None:
    event = ApprovalRecord(call=U64(4), approval_id=U64(482913), verdict="refused", by=U64(1000),
                           reason=None, redecision=None)
    assert line(event) == OLD_APPROVAL
    assert parse_record(OLD_APPROVAL).event == event
    assert _scan(OLD_APPROVAL) is not None  # the verifier's fast path still takes it


def test_an_approval_with_a_passkey_round_trips_on_both_paths() -> None:
    use = PasskeyUse(credential_id="mVJ2mXoxbEwWpbjMD-jMiA", sign_count=U64(3),
                     assertion_sha256="cd" * 32)
    event = ApprovalRecord(call=U64(4), approval_id=U64(482913), verdict="refused",
                           by=U64(1000), reason=None, redecision=None, passkey=use)
    text = line(event)
    assert text.endswith(b',"passkey":{"credential_id":"mVJ2mXoxbEwWpbjMD-jMiA","sign_count":3,'
                         b'"assertion_sha256":"' + b"cd" * 32 + b'"}}}')
    assert parse_record(text).event == event
    facts = _scan(text)
    assert facts is not None and facts.call == 4
    with_null = OLD_APPROVAL[:-2] + b',"passkey":null}}'
    with pytest.raises(RecordSchemaError):
        parse_record(with_null)  # null is written by leaving the key out: one form only


@pytest.mark.parametrize("event", [
    PasskeyRecord(action="added", credential_id="mVJ2", name="phone", public_key="pQECAyYg",
                  by=U64(1000)),
    PasskeyRecord(action="removed", credential_id="mVJ2", name="phone", public_key="",
                  by=U64(1000)),
    ApprovalAttempt(approval_id=U64(482913), by=U64(1000), reason="no assertion"),
    ApprovalAttempt(approval_id=None, by=U64(1000), reason="declassifying s1: no assertion"),
])
def test_passkey_and_attempt_records(event: object) -> None:
    text = line(event)
    assert parse_record(text).event == event
    assert check_record_line(text).call is None
    assert _scan(text) is None  # rare records: only the strict parser checks their rules
    with pytest.raises(RecordSchemaError):
        parse_record(text[:-2] + b',"extra":1}}')


@pytest.mark.parametrize("use", [
    PasskeyUse(credential_id="mVJ2", sign_count=U64(3), assertion_sha256="zz" * 32),
    PasskeyUse(credential_id="", sign_count=U64(3), assertion_sha256="cd" * 32),
    PasskeyUse(credential_id="a+b/", sign_count=U64(3), assertion_sha256="cd" * 32),
])
def test_an_approvals_passkey_in_a_form_brokerd_never_writes_is_refused(
        use: PasskeyUse) -> None:
    # Red-team review: the approval's `passkey` fields had no rule of their own.
    text = line(ApprovalRecord(call=U64(4), approval_id=U64(482913), verdict="refused",
                               by=U64(1000), reason=None, redecision=None, passkey=use))
    assert _scan(text) is None
    with pytest.raises(RecordSchemaError):
        check_record_line(text)
