"""The verifier's block path (`feed_block`, `scan_block`) against its line path.

Every check the line path makes is kept: the same report, line for line, for valid
logs and for logs with each field of a record tampered with, wherever the block
boundaries fall; and the block path is really taken on an ordinary log.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.bxctl._audit_assertions import KeptAssertions
from boxmaker.proto._convert import U64
from boxmaker.proto._errors import DecodeError
from boxmaker.proto._json import MAX_DEPTH
from boxmaker.proto.audit import ChainReport, ChainVerifier
from boxmaker.proto.audit._audit import (
    ApprovalRecord,
    BoundedCall,
    Call,
    DecisionRecord,
    OmittedArgs,
    OutcomeAsk,
    Peer,
    Record,
    Stop,
    encode_record,
    line_hash,
)
from boxmaker.proto.audit._audit_passkey import PasskeyUse
from boxmaker.proto.audit._audit_scan import _args_ok, check_record_line
from boxmaker.proto.audit._audit_scan_block import _DEEP, _all_args_ok, scan_block
from tests.fakes.audit_log import PUBLIC, LogBuilder, line_of, one_of_each

NAME = "2026-11-28.jsonl"


def ordinary_log(rounds: int = 6) -> list[bytes]:
    """Lines of one file: calls allowed, asked, denied, approvals, results, the rest."""
    builder = LogBuilder(NAME)
    builder.start()
    for _ in range(rounds):
        builder.call()
        builder.call(allowed=False)
        asked = builder.ask()
        for event in one_of_each():
            kind = type(event).__name__
            if kind in ("Recovery", "Break", "PasskeyRecord"):
                continue
            builder.add(attrs.evolve(event, call=asked) if hasattr(event, "call") else event)
        builder.add(ApprovalRecord(call=asked, approval_id=482913, verdict="abandoned", by=None,
                                   reason=None, redecision=None))
    builder.stop()
    return [line[:-1] for line in builder.files[NAME]]


def by_line(lines: list[bytes], last_newline: bool = True) -> tuple[ChainReport, Any]:
    kept = KeptAssertions()
    verifier = ChainVerifier(on_line=kept.feed_line)
    verifier.begin_file(NAME)
    for number, line in enumerate(lines, start=1):
        verifier.feed_content(line, last_newline or number < len(lines))
    verifier.end_file()
    return verifier.finish(), (kept._call_lines, kept._ask_lines, kept.approvals)


def by_blocks(lines: list[bytes], cuts: list[int], last_newline: bool = True
              ) -> tuple[ChainReport, Any, int]:
    kept = KeptAssertions()
    verifier = ChainVerifier(on_line=kept.feed_line, on_block=kept.feed_block)
    verifier.begin_file(NAME)
    whole = lines if last_newline else lines[:-1]
    points = sorted({c for c in cuts if 0 < c < len(whole)})
    for start, end in zip([0, *points], [*points, len(whole)], strict=True):
        if end > start:
            verifier.feed_block(b"".join(line + b"\n" for line in whole[start:end]))
    if not last_newline and lines:
        verifier.feed_content(lines[-1], False)
    verifier.end_file()
    return verifier.finish(), (kept._call_lines, kept._ask_lines, kept.approvals), \
        verifier.block_lines


def same_both_ways(lines: list[bytes], cuts: list[int] = (), last_newline: bool = True
                   ) -> ChainReport:  # type: ignore[assignment]
    line_report, line_kept = by_line(lines, last_newline)
    block_report, block_kept, _ = by_blocks(lines, list(cuts), last_newline)
    assert block_report == line_report
    assert block_kept == line_kept
    return line_report


def test_an_ordinary_log_takes_the_block_path() -> None:
    lines = ordinary_log()
    report, _, taken = by_blocks(lines, [])
    assert report.ok and report.records == len(lines)
    assert taken == len(lines) - 2  # all but the first and the last line of the block
    assert same_both_ways(lines).ok


def test_the_block_scan_agrees_with_the_line_scan_on_every_ordinary_line() -> None:
    for line in ordinary_log(1):
        facts = check_record_line(line)
        block = scan_block(line.decode(), 1)
        assert block is not None, line
        assert (int(block.seqs[0]), block.prevs[0], block.keys[0]) == facts[:3]
        assert (block.ref_calls[0] if block.refs else None) == facts.call
        assert (block.ref_lets[0] if block.refs else False) == facts.lets_run


# -- each field tampered with, the same verdict both ways ------------------------------------

def rewrite(line: bytes, old: str, new: str) -> bytes:
    text = line.decode()
    assert old in text, (old, text)
    return text.replace(old, new, 1).encode()


def retext(lines: list[bytes], index: int, change: Any, *, chain: bool) -> list[bytes]:
    """Line `index` changed; with `chain`, the prev of the line after it follows it
    (so that only the field itself is wrong)."""
    out = list(lines)
    out[index] = change(out[index])
    if chain and index + 1 < len(out):
        following = out[index + 1].decode()
        out[index + 1] = re.sub(r'"prev":"[0-9a-f]{64}"', f'"prev":"{line_hash(out[index])}"',
                                following, count=1).encode()
    return out


def index_of(lines: list[bytes], needle: str, nth: int = 2) -> int:
    found = [i for i, line in enumerate(lines) if needle in line.decode()]
    return found[min(nth, len(found) - 1)]


TAMPERS: list[tuple[str, str, Any, str]] = [
    # (what, a line holding, the change, the failure it must give)
    ("seq", '"call":{', lambda x: re.sub(rb'"seq":(\d+)', lambda m: b'"seq":%d' % (int(m[1]) + 5),
                                         x, count=1), "seq_gap"),
    ("seq leading zero", '"call":{', lambda x: x.replace(b'"seq":', b'"seq":0', 1), "bad_record"),
    ("prev", '"result":{', lambda x: re.sub(rb'"prev":"[0-9a-f]', b'"prev":"g', x, count=1),
     "bad_record"),
    ("prev other hash", '"result":{',
     lambda x: re.sub(rb'"prev":"[0-9a-f]{64}"', b'"prev":"' + b"0" * 64 + b'"', x, count=1),
     "hash_mismatch"),
    ("ts date", '"call":{', lambda x: re.sub(rb'"ts":"2026-11-28', b'"ts":"2026-02-30', x),
     "bad_record"),
    ("ts form", '"call":{', lambda x: x.replace(b'Z","prev"', b'","prev"', 1), "bad_record"),
    ("key", '"stop":{', lambda x: x.replace(b'"stop":{', b'"stopp":{', 1), "bad_record"),
    ("decision call", '"decision":{',
     lambda x: re.sub(rb'"decision":\{"call":\d+', b'"decision":{"call":99999', x),
     "bad_reference"),
    ("decision call later", '"decision":{',
     lambda x: re.sub(rb'"decision":\{"call":\d+', b'"decision":{"call":%d' % 10**6, x),
     "bad_reference"),
    ("result call", '"result":{',
     lambda x: re.sub(rb'"result":\{"call":\d+', b'"result":{"call":77777', x), "bad_reference"),
    ("approval call", '"approval":{',
     lambda x: re.sub(rb'"approval":\{"call":\d+', b'"approval":{"call":55555', x),
     "bad_reference"),
    ("approval verdict", '"verdict":"approved"',
     lambda x: x.replace(b'"verdict":"approved"', b'"verdict":"refused"', 1), "bad_record"),
    ("approval by", '"verdict":"abandoned"',
     lambda x: x.replace(b'"by":null', b'"by":1000', 1), "bad_record"),
    ("expires", '"expires_at":', lambda x: re.sub(rb'"expires_at":"\d{4}-\d\d-\d\d',
                                                  b'"expires_at":"2026-13-01', x), "bad_record"),
    ("args order", '"tool":"read_file"',
     lambda x: x.replace(b'"args":{', b'"args":{"zz":1,', 1), "bad_record"),
    ("args space", '"tool":"read_file"',
     lambda x: x.replace(b'"args":{', b'"args":{ ', 1), "bad_record"),
    ("args duplicate", '"tool":"read_file"',
     lambda x: x.replace(b'"args":{', b'"args":{"a":0,"a":0,', 1), "bad_record"),
    ("args NaN", '"tool":"read_file"',
     lambda x: x.replace(b'"args":{', b'"args":{"a":NaN,', 1), "bad_json"),
    ("args not one object", '"tool":"read_file"',
     lambda x: re.sub(rb'"args":(\{.*?\}),"peer"', rb'"args":\1,{},"peer"', x, count=1),
     "bad_json"),
    ("tool too long", '"tool":"read_file"',
     lambda x: x.replace(b'"tool":"read_file"', b'"tool":"' + b"t" * 1025 + b'"', 1),
     "bad_record"),
    ("non-ASCII", '"stop":{', lambda x: x.replace(b'"stop":{', '"stop":{"é":1,'.encode(), 1),
     "bad_record"),
    ("surrogate", '"reason":"', lambda x: x.replace(b'"reason":"', b'"reason":"\\ud800', 1),
     "bad_record"),
    ("garbage", '"call":{', lambda x: b"not a record", "bad_json"),
]


@pytest.mark.parametrize(("what", "holding", "change", "kind"), TAMPERS,
                         ids=[t[0] for t in TAMPERS])
@pytest.mark.parametrize("chain", [True, False])
def test_each_field_tampered_with(what: str, holding: str, change: Any, kind: str,
                                  chain: bool) -> None:
    lines = ordinary_log()
    index = index_of(lines, holding)
    changed = retext(lines, index, change, chain=chain)
    assert changed[index] != lines[index], what
    for cuts in ([], [index], [index + 1], [index - 1, index + 2], [3, 50, 90]):
        report = same_both_ways(changed, cuts)
        assert not report.ok
        found = {f.kind for f in report.failures}
        if chain or kind in ("bad_json", "bad_record"):
            assert kind in found or (kind == "bad_record" and "bad_json" in found), (what, found)


def test_a_missing_newline_and_a_torn_tail() -> None:
    lines = ordinary_log()
    same_both_ways(lines, [7, 20], last_newline=False)
    joined = [lines[5] + lines[6], *lines[7:]]
    same_both_ways(lines[:5] + joined, [4, 9])


# -- any damage, any cut --------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(data=st.data(), cuts=st.lists(st.integers(1, 120), max_size=5))
def test_any_byte_damage_any_cut(data: st.DataObject, cuts: list[int]) -> None:
    lines = ordinary_log(3)
    index = data.draw(st.integers(0, len(lines) - 1))
    line = bytearray(lines[index])
    at = data.draw(st.integers(0, len(line) - 1))
    line[at] = data.draw(st.sampled_from(
        [line[at] ^ 1, 0x22, 0x2C, 0x7B, 0x7D, 0x5C, 0x30, 0x31, 0x20, 0xC3]))
    changed = [*lines[:index], bytes(line), *lines[index + 1:]]
    same_both_ways(changed, cuts)


@settings(max_examples=100, deadline=None)
@given(args=st.dictionaries(st.text(max_size=6), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                              max_size=3), max_leaves=10),
    max_size=4), cut=st.integers(1, 60))
def test_any_arguments(args: dict[str, Any], cut: int) -> None:
    lines = ordinary_log(2)
    index = index_of(lines, '"tool":"read_file"', 1)
    text = json.dumps(args, separators=(",", ":"))
    changed = retext(lines, index,
                     lambda x: re.sub(rb'"args":\{.*?\},"peer"', b'"args":' + text.encode()
                                      .replace(b"\\", b"\\\\") + b',"peer"', x, count=1),
                     chain=True)
    same_both_ways(changed, [cut])


@pytest.mark.parametrize("cut", [0, 1, 2, 3])
def test_a_recovery_right_after_a_block_names_the_line_before_it(cut: int) -> None:
    builder = LogBuilder(NAME)
    for _ in range(3):
        builder.call()
    # a torn line that parses, and would continue the chain
    builder.torn(encode_record(Record(seq=builder.seq + 1, ts=builder.ts(),
                                      prev=builder.last_record_hash, event=Stop(reason="x"))))
    builder.recover()
    builder.call()
    lines = [line[:-1] for line in builder.files[NAME]]
    recovery = len(lines) - 4  # then a call, its decision and result
    # a block whose last line is the recovery: the torn line is the last of its middle
    report = same_both_ways(lines, [recovery - 2 - cut, recovery + 1])
    assert report.ok and report.recovered


# -- what the block scan takes since it no longer refuses any "\ud" (issue 23 goal 5) --------

def log_of(events: list[Any], rounds: int = 3) -> list[bytes]:
    """An ordinary log with `events` (their `call` the round's asked call) in each round."""
    builder = LogBuilder(NAME)
    builder.start()
    for _ in range(rounds):
        builder.call()
        asked = builder.ask()
        for event in events:
            builder.add(attrs.evolve(event, call=asked) if hasattr(event, "call") else event)
        builder.call(allowed=False)
    builder.stop()
    return [line[:-1] for line in builder.files[NAME]]


def taken(lines: list[bytes]) -> int:
    """How many lines the block path took, the report and kept lines the same both ways."""
    report, _, count = by_blocks(lines, [])
    assert same_both_ways(lines) == report
    for cut in (2, len(lines) // 2, len(lines) - 3):
        same_both_ways(lines, [cut])
    return count


@pytest.mark.parametrize(("reason", "block"), [
    ("\U0001f600", False),  # written as a surrogate pair: the line path decides
    ("\\ud83d", True),  # a backslash and "ud83d": no escape, the block may take it
    ("\\\U0001f600", False),  # a backslash, then a pair
])
def test_a_ud_escape_in_a_string_that_is_no_argument(reason: str, block: bool) -> None:
    lines = log_of([Stop(reason=reason)])
    index = index_of(lines, '"stop":{"reason":"\\', 1)
    assert (scan_block(lines[index].decode(), 1) is not None) is block
    assert taken(lines) == (len(lines) - 2 if block else 0)
    assert same_both_ways(lines).ok


def test_a_lone_surrogate_is_refused_both_ways() -> None:
    lines = log_of([Stop(reason="\ud800")])
    report = same_both_ways(lines, [5, 9])
    assert not report.ok
    assert {f.kind for f in report.failures} & {"bad_json", "bad_record"}


@pytest.mark.parametrize(("tool", "args"), [
    ("read\U0001f600", {"a": 1}), ("t", {"e": "\U0001f600"}), ("t", {"e": "\\ud83d"}),
])
def test_a_ud_escape_in_a_tool_or_in_arguments_takes_the_line_path(
        tool: str, args: dict[str, Any]) -> None:
    call = Call(session="c-1", tool=tool, args=args, peer=Peer(uid=1, pid=2))
    assert b"\\ud" in line_of(call)
    assert scan_block(line_of(call).decode(), 1) is None
    lines = log_of([call])
    assert taken(lines) == 0 and same_both_ways(lines).ok


def test_both_call_forms_in_one_block() -> None:
    older = Call(session="c-1", tool="t", args={"a": 1}, peer=Peer(uid=1, pid=2))
    newer = BoundedCall(session="c-1", tool="t", args={"a": 1}, peer=Peer(uid=1, pid=2),
                        omitted=None)
    cut = BoundedCall(session="c-1", tool="t", args={}, peer=Peer(uid=1, pid=2),
                      omitted=OmittedArgs(bytes=9, sha256="cd" * 32))
    lines = log_of([older, newer, cut, older])
    text = "\n".join(line.decode() for line in lines)
    assert '"pid":2}}}' in text and '"pid":2},"omitted":null}}' in text
    assert '"omitted":{"bytes":9' in text
    assert taken(lines) == len(lines) - 2
    # the merged expression: the older form is the newer without its `omitted`
    older_line, newer_line = line_of(older), line_of(newer)
    facts = scan_block(older_line.decode() + "\n" + newer_line.decode(), 2)
    assert facts is not None and facts.is_call == [True, True]
    # arguments cut but written: refused both ways; an older form holding "omitted" in
    # its arguments: its one parse decides
    bad = retext(lines, index_of(lines, '"omitted":{"bytes":9'),
                 lambda x: x.replace(b'"args":{}', b'"args":{"a":1}', 1), chain=True)
    assert not same_both_ways(bad).ok
    tricky = Call(session="c-1", tool="t", args={"a": {}, "omitted": None},
                  peer=Peer(uid=1, pid=2))
    line = line_of(tricky)
    assert check_record_line(line).key == "call"
    assert taken(log_of([tricky])) > 0


def test_asks_and_their_calls() -> None:
    builder = LogBuilder(NAME)
    builder.start()
    asked = [builder.ask() for _ in range(4)]
    builder.add(DecisionRecord(call=asked[0], outcome=OutcomeAsk(
        approval_id=7, expires_at="2026-11-30T07:10:00.000000Z"), grant="g", state=PUBLIC,
        grants_digest="ab" * 32))  # asked again
    builder.call()
    builder.stop()
    lines = [line[:-1] for line in builder.files[NAME]]
    text = "\n".join(line.decode() for line in lines[1:-1])
    facts = scan_block(text, len(lines) - 2)
    assert facts is not None
    assert facts.ask_calls == [*asked, asked[0]]
    assert [facts.keys[index] for index in facts.asks] == ["decision"] * 5
    _, kept, count = by_blocks(lines, [])
    assert count == len(lines) - 2
    assert {call: len(found) for call, found in kept[1].items()} == {
        asked[0]: 2, asked[1]: 1, asked[2]: 1, asked[3]: 1}
    taken(lines)


def test_asks_then_an_approval_with_a_passkey_in_the_same_block() -> None:
    use = PasskeyUse(credential_id="mVJ2mXoxbEwWpbjMD-jMiA", sign_count=U64(3),
                     assertion_sha256="cd" * 32)
    approval = ApprovalRecord(call=0, approval_id=482913, verdict="refused", by=1000,
                              reason="no", redecision=None, passkey=use)
    lines = log_of([approval])
    assert taken(lines) == len(lines) - 2
    _, kept = by_line(lines)
    assert len(kept[2]) == 3 and not kept[1]  # each approval took its asks


def arg_texts() -> list[str]:
    deep = _DEEP
    return [
        '{"a":1}', '{"a":1},{"b":2}', '{"a":1}{"b":2}', '{"a":1} ', '{"a":[1,2]]',
        '{"a":{"b":0,"b":0}}', '{"a":0,"a":0}', '{"b":0,"a":0}', '{"a":{"c":0,"b":0}}',
        '{"a":"\\u00e9"}', '{"a":"é"}', '{"a":1.0}', '{"a":1.00}', '{"a":NaN}', '{}',
        '{"a":"[[[[{{{{"}', '{"a":[{"b":2},{"c":3}]}', '{"a":"},{"}', '{"a":[1', '2]},{}',
        '{"a":"}', '{"},{}', '{"a":[1,2]},{}',
        # at the bound (the object and `deep` lists in it) and one past it, short and long
        '{"a":' + "[" * deep + "]" * deep + "}",
        '{"a":' + "[" * (deep + 1) + "]" * (deep + 1) + "}",
        '{"a":' + "[" * deep + '"' + "x" * 200 + '"' + "]" * deep + "}",
        '{"a":' + "[" * (deep + 1) + '"' + "x" * 200 + '"' + "]" * (deep + 1) + "}",
        '{"a":' + "[" * (deep - 1) + "{}" + "]" * (deep - 1) + ',"b":"' + "x" * 200 + '"}',
        '{"a":"' + "[" * (deep + 5) + '"}',
        '{"a":' + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}",
    ]


@pytest.mark.parametrize("text", arg_texts())
def test_arguments_alone_and_with_others_as_the_line_check(text: str) -> None:
    alone = _args_ok('"t"', text, "null")
    assert _all_args_ok(['"t"'], [text]) is alone
    for other in ('{"a":1}', '{"b":2}', '{}'):
        both = alone and _args_ok('"t"', other, "null")
        assert _all_args_ok(['"t"', '"t"'], [text, other]) is both
        assert _all_args_ok(['"t"', '"t"'], [other, text]) is both


def test_the_depth_bound_is_exact() -> None:
    for filler in ("", '"' + "x" * 200 + '"'):
        at, past = ('{"a":' + "[" * n + filler + "]" * n + "}" for n in (_DEEP, _DEEP + 1))
        assert at in arg_texts() and past in arg_texts()
        assert _args_ok('"t"', at, "null") and not _args_ok('"t"', past, "null")


def test_an_arguments_text_that_is_a_json_prefix_of_another() -> None:
    # joined, '{"a":1}' and '{"b":2}' read as the one text '{"a":1},{"b":2}' and '{}' would
    assert not _all_args_ok(['"t"', '"t"'], ['{"a":1},{"b":2}', '{}'])
    assert _all_args_ok(['"t"', '"t"', '"t"'], ['{"a":1}', '{"b":2}', '{}'])
    # joined, each pair reads as one array of two objects in their one form
    assert _args_ok('"t"', '{"a":"},{"}', "null")
    for pair in (['{"a":[1', '2]},{}'], ['{"a":"}', '{"},{}']):
        assert not _args_ok('"t"', pair[0], "null")
        assert not _all_args_ok(['"t"', '"t"'], pair)
        assert not _all_args_ok(['"t"', '"t"', '"t"'], [*pair, '{"a":"},{"}'])
    lines = ordinary_log(2)
    index = index_of(lines, '"tool":"read_file"', 1)
    changed = retext(lines, index, lambda x: re.sub(
        rb'"args":\{.*?\},"peer"', b'"args":{"a":1},{"b":2},"peer"', x, count=1), chain=True)
    assert not same_both_ways(changed, [index + 2]).ok


def line_ok(line: bytes) -> bool:
    try:
        check_record_line(line)
    except DecodeError:
        return False
    return True


@pytest.mark.parametrize("verdict", ["approved", "refused", "expired", "requester_gone",
                                     "abandoned"])
@pytest.mark.parametrize("by", ["null", "1000"])
@pytest.mark.parametrize("redecision", [False, True])
def test_the_approval_rules_in_the_expression(verdict: str, by: str, redecision: bool) -> None:
    approved, refused = (line_of(event).decode() for event in one_of_each()
                         if type(event) is ApprovalRecord and event.verdict in (
                             "approved", "refused"))
    text = approved if redecision else refused
    text = re.sub(r'"verdict":"[a-z_]+","by":[0-9a-z]+,',
                  f'"verdict":"{verdict}","by":{by},', text, count=1)
    valid = (verdict == "approved") == redecision and (verdict != "abandoned" or by == "null")
    assert line_ok(text.encode()) is valid
    assert (scan_block(text, 1) is not None) is valid
