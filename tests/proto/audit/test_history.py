"""HistoryReader cuts calls out of verified lines by position: checked against the
strict parser (`parse_record`) on records made by the record encoder (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._json import canonical
from boxmaker.proto._taint import Taint
from boxmaker.proto.audit._audit import (
    GENESIS_PREV,
    ApprovalRecord,
    Call,
    DecisionRecord,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    Peer,
    Record,
    encode_record,
    parse_record,
)
from boxmaker.proto.audit._audit_scan import check_record_line
from boxmaker.proto.audit._history import HistoryApproval, HistoryCall, HistoryReader

TRICKY = st.sampled_from(['","tool":', ',"args":{', ',"peer":{"uid":', '"grant":', "\\",
                          "\u001b[2J", "\u202e", "\ud7ff", "\U0001f600", ',"state":{"label":"'])
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=8)), max_size=4).map("".join)
VALUE: Any = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), TEXT),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(TEXT, inner, max_size=3)),
                          max_leaves=8)
OUTCOMES = st.one_of(
    st.just(OutcomeAllowed()),
    st.builds(OutcomeAsk, approval_id=st.integers(0, 999_999),
              expires_at=st.just("2026-11-29T07:10:00.000000Z")),
    st.builds(OutcomeDenied, code=st.sampled_from(["no_grant", "bad_args", "taint"]),
              reason=TEXT),
)


def line(seq: int, event: Any) -> bytes:
    return encode_record(Record(seq=seq, ts="2026-11-29T07:00:00.000001Z", prev=GENESIS_PREV,
                                event=event))


@settings(max_examples=300)
@given(tool=TEXT, args=st.dictionaries(TEXT, VALUE, max_size=4), outcome=OUTCOMES,
       grant=st.one_of(st.none(), st.just("docs-fetch")),
       label=st.sampled_from(["public", "private", "secret"]), untrusted=st.booleans(),
       verdict=st.sampled_from(["refused", "expired", "requester_gone"]))
def test_reader_agrees_with_the_strict_parser(tool: str, args: dict[str, Any], outcome: Any,
                                              grant: str | None, label: Any, untrusted: bool,
                                              verdict: str) -> None:
    calls: list[HistoryCall] = []
    approvals: list[HistoryApproval] = []
    reader = HistoryReader(calls.append, approvals.append)
    state = Taint(label=label, untrusted=untrusted)
    lines = [
        line(7, Call(session="c-1", tool=tool, args=args, peer=Peer(uid=1000, pid=4))),
        line(8, DecisionRecord(call=7, outcome=outcome, grant=grant, state=state,
                               grants_digest="ab" * 32)),
        line(9, ApprovalRecord(call=7, approval_id=3, verdict=verdict,  # type: ignore[arg-type]
                               by=None, reason=None, redecision=None)),
    ]
    for raw in lines:
        reader.feed(raw, check_record_line(raw))
    assert approvals == [HistoryApproval(call=7, verdict=verdict)]
    call_event: Any = parse_record(lines[0]).event
    decision: Any = parse_record(lines[1]).event
    (found,) = calls
    assert found.seq == 7 and found.ts == "2026-11-29T07:00:00.000001Z"
    assert found.session == "c-1" and found.tool == call_event.tool
    assert found.args() == call_event.args == canonical(args)
    assert found.args_text == json.dumps(canonical(args), separators=(",", ":"))
    tag = type(decision.outcome).__name__
    expected = {"OutcomeAllowed": "allowed", "OutcomeAsk": "ask"}.get(tag)
    assert found.outcome == (expected or f"denied:{decision.outcome.code}")
    assert found.grant == grant and found.state == state
    assert reader.pending == 0


def test_a_decision_without_its_call_is_passed_over() -> None:
    calls: list[HistoryCall] = []
    reader = HistoryReader(calls.append)
    raw = line(8, DecisionRecord(call=7, outcome=OutcomeAllowed(), grant=None,
                                 state=Taint(label="public", untrusted=False),
                                 grants_digest="ab" * 32))
    reader.feed(raw, check_record_line(raw))
    assert calls == []
