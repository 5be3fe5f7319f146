"""The verifier's fast line check agrees with parse_record, and is really taken."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._errors import DecodeError
from boxmaker.proto.audit._audit import (
    Call,
    Declassify,
    Peer,
    Record,
    Stop,
    encode_record,
    parse_record,
)
from boxmaker.proto.audit._audit_scan import _scan, check_record_line, facts_of
from tests.fakes.audit_log import HEX, TS, line_of, one_of_each


def assert_same_verdict(line: bytes) -> None:
    """check_record_line judges exactly as parse_record, with the same facts."""
    try:
        record = parse_record(line)
    except DecodeError as exc:
        with pytest.raises(type(exc)):
            check_record_line(line)
        assert _scan(line) is None
        return
    assert check_record_line(line) == facts_of(record)


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: type(e).__name__)
def test_valid_lines_take_the_fast_path(event: Any) -> None:
    line = line_of(event)
    facts = _scan(line)
    assert facts is not None
    assert facts == facts_of(parse_record(line))


def test_facts() -> None:
    events = one_of_each()
    assert _scan(line_of(events[4])) == (1, HEX, "decision", 3, True)  # allowed
    assert _scan(line_of(events[5])) == (1, HEX, "decision", 3, False)  # ask
    assert _scan(line_of(events[7])) == (1, HEX, "approval", 3, True)  # approved, allowed
    assert _scan(line_of(events[8])) == (1, HEX, "approval", 3, False)  # refused
    assert _scan(line_of(events[10])) == (1, HEX, "result", 3, False)
    assert _scan(line_of(events[3])) == (1, HEX, "call", None, False)


text = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | text
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(text, text, st.dictionaries(text, json_values, max_size=4))
def test_any_strings_and_arguments(tool: str, reason: str, args: dict[str, Any]) -> None:
    for event in (Call(session="s", tool=tool, args=args, peer=Peer(uid=1, pid=2)),
                  Stop(reason=reason),
                  Declassify(session="s", from_=one_of_each()[12].from_,
                             to=one_of_each()[12].to, by=1, reason=reason)):
        line = encode_record(Record(seq=7, ts=TS, prev=HEX, event=event))
        assert_same_verdict(line)
        if b"\\ud" not in line:
            assert _scan(line) is not None, line


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(one_of_each()), st.data())
def test_damaged_lines_judged_alike(event: Any, data: st.DataObject) -> None:
    line = bytearray(line_of(event))
    for _ in range(data.draw(st.integers(1, 3))):
        offset = data.draw(st.integers(0, len(line) - 1))
        line[offset] = data.draw(st.sampled_from(b' "{}[],:0129aefnuZ\\\x00\x7f\xff'))
    assert_same_verdict(bytes(line))


@pytest.mark.parametrize("replace", [
    (b'"tool":"http_fetch"', b'"tool":"http\\u005ffetch"'),  # an escape with a shorter form
    (b'"tool":"http_fetch"', b'"tool":"http\\/fetch"'),
    (b'"tool":"http_fetch"', b'"tool":"\\u00E9"'),  # upper-case hex
    (b'"tool":"http_fetch"', b'"tool":"\\ud83d\\ude00"'),  # a pair: strict path, accepted
    (b'"tool":"http_fetch"', b'"tool":"\\ud83d"'),  # a lone surrogate
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"url":"https://x/","method":"GET"}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"method":"GET","method":"GET"}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"method":NaN}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"method":1.00}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"method":1e400}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"method":-Infinity}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"method": 1}'),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"a":' + b"[" * 62 + b"]" * 62 + b"}"),
    (b'"args":{"method":"GET","url":"https://x/"}', b'"args":{"a":' + b"[" * 61 + b"]" * 61 + b"}"),
    (b'"args":{"method":"GET","url":"https://x/"}',
     b'"args":{"a":{"peer":{"uid":1,"pid":2}}},"peer":{"uid":1,"pid":2}}},"x":{"b":1}'),
    (b'"peer":{"uid":1000,"pid":77}', b'"peer":{"pid":77,"uid":1000}'),
    (b'"session":"c-1","tool":"http_fetch"', b'"tool":"http_fetch","session":"c-1"'),
    (b'"seq":1,', b'"seq":18446744073709551615,'),
    (b'"seq":1,', b'"seq":18446744073709551616,'),
    (b'"ts":"2026-11-29', b'"ts":"2026-02-29'),
    (b'"ts":"2026-11-29', b'"ts":"2028-02-29'),
    (b'"ts":"2026-11-29', b'"ts":"0000-01-01'),
    (b'T07:00:00.000000Z","prev"', b'T24:00:00.000000Z","prev"'),
    (b'T07:00:00.000000Z","prev"', b'T23:59:60.000000Z","prev"'),
])
def test_edges_judged_alike(replace: tuple[bytes, bytes]) -> None:
    line = line_of(one_of_each()[3])
    assert replace[0] in line
    assert_same_verdict(line.replace(*replace))


def test_long_tool_names() -> None:
    for size in (1024, 1025):
        for char in ("t", "\x1b"):
            line = encode_record(Record(seq=1, ts=TS, prev=HEX, event=Call(
                session="s", tool=char * size, args={}, peer=Peer(uid=1, pid=1))))
            assert_same_verdict(line)
    assert json.loads(line)  # the last one is valid JSON, refused for its length
