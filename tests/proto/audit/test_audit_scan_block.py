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
from boxmaker.proto.audit import ChainReport, ChainVerifier
from boxmaker.proto.audit._audit import ApprovalRecord, Record, Stop, encode_record, line_hash
from boxmaker.proto.audit._audit_scan import check_record_line
from boxmaker.proto.audit._audit_scan_block import scan_block
from tests.fakes.audit_log import LogBuilder, one_of_each

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
