"""Taints recomputed from the verified records as start-up streams them (04-audit); the
signed pins kept for the passkey registry and every pin record folded into the ledger."""

from __future__ import annotations

import attrs

from boxmaker.brokerd._tool_sources import pin_record, unpin_record
from boxmaker.brokerd.log._audit_link import TaintCollector
from boxmaker.proto._convert import U64, JsonObject
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.audit._audit import (
    GENESIS_PREV,
    Call,
    Declassify,
    Peer,
    Record,
    ResultRecord,
    Stop,
)
from boxmaker.proto.audit._audit_passkey import PasskeyUse
from tests.brokerd._mcp_home import pin_for
from tests.test_source_files import SOURCE, TOOLS

PRIVATE = Taint(label="private", untrusted=False)
SECRET = Taint(label="secret", untrusted=True)


def record(seq: int, event: object) -> Record:
    return Record(seq=seq, ts="2026-11-29T07:00:00.000000Z", prev=GENESIS_PREV,
                  event=event)  # type: ignore[arg-type]


def call(session: str) -> Call:
    return Call(session=session, tool="echo", args=JsonObject({}), peer=Peer(uid=U64(0),
                                                                             pid=U64(1)))


def result(call_id: int, state: Taint) -> ResultRecord:
    return ResultRecord(call=U64(call_id), status="ok", label=state.label,
                        untrusted=state.untrusted, state=state, output=None)


def test_collects_changes_and_known_sessions() -> None:
    collector = TaintCollector()
    for item in [
        record(0, Stop(reason="x")),
        record(1, call("a")),
        record(2, call("b")),
        record(3, result(1, PRIVATE)),
        record(4, result(2, NEW_SESSION)),  # b ran but stayed public: no change
        record(5, call("a")),
        record(6, result(5, PRIVATE)),  # unchanged: the seq stays 3
        record(7, call("c")),
        record(8, result(7, SECRET)),
        record(9, Declassify(session="c", from_=SECRET, to=NEW_SESSION, by=U64(0),
                             reason="checked")),
        record(10, result(99, SECRET)),  # a result of no known call changes nothing
    ]:
        collector(item)
    assert collector.taints == {"a": (PRIVATE, 3), "c": (NEW_SESSION, 9)}
    assert collector.known == {"a", "b", "c"}
    assert collector.head_seq == 10


def test_open_asks_are_those_with_no_approval_record_across_breaks() -> None:
    # issue 22 item 15: what start-up closes as abandoned
    from boxmaker.brokerd.log._audit_link import _abandoned
    from boxmaker.proto.audit._audit import (
        ApprovalRecord,
        Break,
        BreakFirst,
        DecisionRecord,
        OutcomeAllowed,
        OutcomeAsk,
    )

    def decision(call_id: int, outcome: object) -> DecisionRecord:
        return DecisionRecord(call=U64(call_id), outcome=outcome,  # type: ignore[arg-type]
                              grant="g", state=PRIVATE, grants_digest="d")

    def approval(call_id: int, verdict: str) -> ApprovalRecord:
        return ApprovalRecord(call=U64(call_id), approval_id=U64(7), verdict=verdict,  # type: ignore[arg-type]
                              by=None, reason=None, redecision=None)

    ask = OutcomeAsk(approval_id=U64(500_001), expires_at="2026-11-29T07:05:00.000000Z")
    collector = TaintCollector()
    for seq, event in enumerate([
        call("s1"), decision(0, ask),                      # answered: closed
        call("s1"), decision(2, ask),                      # pending before a break
        call("s2"), decision(4, OutcomeAllowed()),         # allowed: no ask at all
        call("s3"), decision(6, ask),                      # closed by an earlier abandoned
        approval(0, "expired"), approval(6, "abandoned"),
        Break(first=BreakFirst(file="2026-11-29.jsonl", line=3, kind="bad_json"),
              failures=U64(1), by=U64(0)),
        call("s4"), decision(11, ask),                     # pending after the break
    ]):
        collector(record(seq, event))
    assert collector.open_asks == {2: 500_001, 11: 500_001}
    closed = _abandoned(collector.open_asks)
    assert [(a.call, a.verdict, a.by, a.redecision) for a in closed] == [
        (2, "abandoned", None, None), (11, "abandoned", None, None)]


def test_signed_pins_feed_the_passkeys_and_every_pin_the_ledger() -> None:
    pin = pin_for(SOURCE, "git", TOOLS)
    use = PasskeyUse(credential_id="AAAA", sign_count=U64(4), assertion_sha256="0" * 64)
    signed = record(1, attrs.evolve(pin_record(pin, prev=None, by=1), passkey=use))
    plain = record(2, pin_record(pin, prev=pin.digest, by=1))
    collector = TaintCollector()
    for item in (signed, plain, record(3, unpin_record("git", prev=pin.digest, by=1,
                                                       reason=None))):
        collector(item)
    assert collector.passkey_records == [signed]  # its sign count, at start
    newest = collector.pins.newest("git")
    assert newest is not None and (newest.event, newest.seq) == ("unpinned", 3)
    assert collector.pins.last_pinned("git") == pin.digest
