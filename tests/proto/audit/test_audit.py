"""Audit records: the one line form, strict parsing, the fast checker's twin."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._convert import structure
from boxmaker.proto._errors import DecodeError
from boxmaker.proto.audit._audit import (
    EVENT_TYPES,
    GENESIS_PREV,
    Call,
    Peer,
    Record,
    RecordJsonError,
    RecordSchemaError,
    Stop,
    day_file_name,
    encode_record,
    event_key,
    event_type,
    is_day_file_name,
    line_hash,
    parse_record,
)
from boxmaker.proto.wire._wire import format_ts
from tests.fakes.audit_log import HEX, TS, line_of, one_of_each


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: type(e).__name__)
def test_every_event_round_trips(event: Any) -> None:
    record = Record(seq=5, ts=TS, prev=HEX, event=event)
    line = encode_record(record)
    assert line.isascii()
    assert b"\n" not in line
    assert parse_record(line) == record
    assert parse_record(line + b"\n") == record
    document = json.loads(line)
    assert list(document) == ["seq", "ts", "prev", event_key(event)]
    # The converter (the authority) agrees with the fast checker.
    cls = type(event)  # a call record without `omitted` is the older form, still read
    assert cls is EVENT_TYPES[event_key(event)] or (cls is Call and "omitted" not in document[
        "call"])
    assert structure(document[event_key(event)], cls) == event


def test_declassify_writes_from() -> None:
    line = encode_record(Record(seq=0, ts=TS, prev=GENESIS_PREV, event=one_of_each()[12]))
    assert b'"declassify":{"session":"c-1","from":{"label":"secret"' in line


def test_call_args_are_written_canonical() -> None:
    call = Call(session="s", tool="t", args={"b": {"z": 1, "a": [{"y": 1, "x": 2}]}, "a": "é"},
                peer=Peer(uid=1, pid=2))
    line = encode_record(Record(seq=0, ts=TS, prev=GENESIS_PREV, event=call))
    assert b'"args":{"a":"\\u00e9","b":{"a":[{"x":2,"y":1}],"z":1}}' in line
    assert parse_record(line).event == call


GOOD = line_of(one_of_each()[5])


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"", RecordJsonError),
        (b"not json", RecordJsonError),
        (b"[1]", RecordSchemaError),
        (GOOD[:-1], RecordJsonError),
        (GOOD.replace(b'"seq":1', b'"seq":1.0'), RecordSchemaError),
        (GOOD.replace(b'"seq":1', b'"seq":true'), RecordSchemaError),
        (GOOD.replace(b'"seq":1', b'"seq":-1'), RecordSchemaError),
        (GOOD.replace(b'"seq":1', b'"seq":18446744073709551616'), RecordSchemaError),
        (GOOD.replace(b'"seq":1,', b'"seq":1, '), RecordSchemaError),
        (GOOD.replace(b'"seq":1,', b'"seq":1,"seq":1,'), RecordJsonError),
        (GOOD.replace(b'"grant":"g"', b'"grant":"g","grant":"g"'), RecordJsonError),
        (GOOD.replace(b'"grant":"g"', b'"grant":"\\u0067"'), RecordSchemaError),
        (GOOD.replace(b'"grant":"g"', b'"grant":"\\ud800"'), RecordJsonError),
        (GOOD.replace(b'"grant":"g"', '"grant":"é"'.encode()), RecordSchemaError),
        (GOOD.replace(b'"grant":"g"', b'"grant":"\xff"'), RecordJsonError),
        (GOOD.replace(b'"grant":"g"', b'"grant":NaN'), RecordJsonError),
        (GOOD.replace(b'"grant":"g"', b'"grant":"g","x":1'), RecordSchemaError),
        (GOOD.replace(b'"grant":"g"', b'"grant":5'), RecordSchemaError),
        (GOOD.replace(b'"untrusted":false', b'"untrusted":0'), RecordSchemaError),
        (GOOD.replace(b'"label":"public"', b'"label":"Public"'), RecordSchemaError),
        (GOOD.replace(b'"ask":{', b'"ask":{"x":1,'), RecordSchemaError),
        (GOOD.replace(b'"ask":{', b'"allowed":{},"ask":{'), RecordSchemaError),
        (GOOD.replace(b'"expires_at":"2026', b'"expires_at":"2O26'), RecordSchemaError),
        (GOOD.replace(b'"ts":"2026-11-29T07', b'"ts":"2026-13-29T07'), RecordSchemaError),
        (GOOD.replace(b'"ts":"2026-11-29T07', b'"ts":"2026-02-30T07'), RecordSchemaError),
        (GOOD.replace(b'.000000Z"', b'.000000+00:00"', 1), RecordSchemaError),
        (GOOD.replace(b'"prev":"9f', b'"prev":"9F'), RecordSchemaError),
        (GOOD.replace(b'"prev":"9f', b'"prev":"'), RecordSchemaError),
        (GOOD.replace(b'{"seq":1,"ts":"' + TS.encode() + b'"',
                      b'{"ts":"' + TS.encode() + b'","seq":1'), RecordSchemaError),
        (GOOD.replace(b'"decision":', b'"decisions":'), RecordSchemaError),
        (GOOD[:-1] + b',"stop":{"reason":"x"}}', RecordSchemaError),
        (b'{"seq":1,"ts":"' + TS.encode() + b'","prev":"' + HEX.encode() + b'"}',
         RecordSchemaError),
        (line_of(Call(session="Bad", tool="t", args={}, peer=Peer(uid=1, pid=1))),
         RecordSchemaError),
        (line_of(Call(session="s", tool="t" * 1025, args={}, peer=Peer(uid=1, pid=1))),
         RecordSchemaError),
        (line_of(Call(session="s", tool="t", args={}, peer=Peer(uid=1, pid=1)))
         .replace(b'"args":{}', b'"args":{"b":1,"a":2}'), RecordSchemaError),
        (line_of(Call(session="s", tool="t", args={}, peer=Peer(uid=1, pid=1)))
         .replace(b'"args":{}', b'"args":{"a":[{"d":1,"c":2}]}'), RecordSchemaError),
        (line_of(Call(session="s", tool="t", args={}, peer=Peer(uid=1, pid=1)))
         .replace(b'"args":{}', b'"args":[[1]]'), RecordSchemaError),
        (line_of(Call(session="s", tool="t", args={}, peer=Peer(uid=1, pid=1)))
         .replace(b'"args":{}', b'"args":{"a":' + b'[' * 70 + b']' * 70 + b'}'),
         RecordJsonError),
        (line_of(one_of_each()[8]).replace(b'"redecision":null',
                                           b'"redecision":' + line_of(one_of_each()[7])
                                           .split(b'"redecision":')[1][:-2]),
         RecordSchemaError),
        (line_of(one_of_each()[7]).replace(b'"redecision":{', b'"redecision":null,"x":{'),
         RecordSchemaError),
        (line_of(one_of_each()[7]).replace(b'"allowed":{}', b'"ask":{}'), RecordSchemaError),
        (line_of(one_of_each()[7]).replace(b'"allowed":{}', b'"allowed":{"x":1}'),
         RecordSchemaError),
        (line_of(one_of_each()[13]).replace(b'"sha256":"9f', b'"sha256":"9F'),
         RecordSchemaError),
        (line_of(one_of_each()[10]).replace(b'"sha256":"9f', b'"sha256":"zz'),
         RecordSchemaError),
        (line_of(one_of_each()[14]).replace(b'"hash_mismatch"', b'"head_mismatch"'),
         RecordSchemaError),
        (line_of(one_of_each()[6]).replace(b'"no_grant"', b'"nope"'), RecordSchemaError),
        (line_of(one_of_each()[12]).replace(b'"from"', b'"from_"'), RecordSchemaError),
        (line_of(one_of_each()[3]).replace(b'"uid":1000,"pid":77', b'"pid":77,"uid":1000'),
         RecordSchemaError),
        (GOOD.replace(b'"grant":"g","state":{"label":"public","untrusted":false}',
                      b'"state":{"label":"public","untrusted":false},"grant":"g"'),
         RecordSchemaError),
    ],
)
def test_bad_lines_are_refused(line: bytes, error: type[DecodeError]) -> None:
    with pytest.raises(error):
        parse_record(line)


def test_errors_name_the_path() -> None:
    with pytest.raises(RecordSchemaError) as info:
        parse_record(GOOD.replace(b'"untrusted":false', b'"untrusted":0'))
    assert info.value.path == "$.decision.state.untrusted"


def test_line_hash_ignores_the_newline() -> None:
    assert line_hash(GOOD) == line_hash(GOOD + b"\n")
    assert len(line_hash(GOOD)) == 64


def test_time_stamps_and_day_files() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=5)))
    assert format_ts(moment) == "2026-01-01T22:04:05.000006Z"
    assert day_file_name(moment) == "2026-01-01.jsonl"
    with pytest.raises(ValueError):
        format_ts(datetime(2026, 1, 1))  # naive on purpose
    assert is_day_file_name("2026-12-31.jsonl")
    assert is_day_file_name("2026-02-30.jsonl")  # the spec's rule: day 01..31
    for name in ["2026-13-01.jsonl", "2026-00-01.jsonl", "2026-01-00.jsonl",
                 "2026-01-32.jsonl", "notes.jsonl", "2026-01-01.json", "2026-1-01.jsonl",
                 "２026-01-01.jsonl", "2026-01-01.jsonl.tmp", "x2026-01-01.jsonl"]:
        assert not is_day_file_name(name), name


# The fast checker must never accept what the converter refuses: mutate the
# JSON value of valid events and compare parse_record with the converter.

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**64 + 1),
                      st.sampled_from(["", "public", "allowed", "ok", "x", "approved"]),
                      st.floats(allow_nan=False, allow_infinity=False))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["call", "label", "untrusted", "allowed", "x", "from", "ok"]), inner, max_size=3)),
    max_leaves=6)


def paths_of(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, sub in value.items():
            found.extend(paths_of(sub, (*path, key)))
    return found


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(one_of_each()), st.data())
def test_fast_checker_agrees_with_converter(event: Any, data: st.DataObject) -> None:
    key = event_key(event)
    document = json.loads(line_of(event))
    paths = paths_of(document[key], (key,))
    path = data.draw(st.sampled_from(paths))
    action = data.draw(st.sampled_from(["replace", "add", "delete"]))
    target = document
    for part in path[:-1]:
        target = target[part]
    if action == "replace" or not isinstance(target[path[-1]], dict):
        target[path[-1]] = data.draw(json_value)
    elif action == "add":
        target[path[-1]][data.draw(st.sampled_from(["x", "call", "from_"]))] = 1
    elif target[path[-1]]:
        target[path[-1]].pop(next(iter(target[path[-1]])))
    line = json.dumps(document, separators=(",", ":")).encode()
    try:
        authority: Any = structure(document[key], event_type(key, document[key]))
    except DecodeError:
        authority = None
    try:
        parsed: Any = parse_record(line).event
    except RecordSchemaError:
        parsed = None
    if parsed is not None:
        assert authority == parsed
    elif authority is not None:
        # Refused by one of the record's own rules (canonical args, words...)
        # that the converter alone does not know.
        with pytest.raises(RecordSchemaError):
            parse_record(line)


def test_timestamps_in_every_record_are_utc_now_compatible() -> None:
    now = format_ts(datetime.now(UTC))
    assert parse_record(line_of(Stop(reason="x"), ts=now)).ts == now
