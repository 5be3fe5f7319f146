"""Field rules of audit records beyond their types (boxmaker/proto/audit/_audit_rules.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto._json import MAX_DEPTH
from boxmaker.proto.audit._audit_rules import canonical_within, event_problem, is_valid_ts

HEX = "ab" * 32


@given(moment=st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31)))
def test_every_real_moment_written_as_04_audit_is_valid(moment: datetime) -> None:
    assert is_valid_ts(moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


@pytest.mark.parametrize("text", [
    "2026-02-30T10:00:00.000000Z",  # no such day
    "2026-13-01T10:00:00.000000Z",
    "2026-12-01T24:00:00.000000Z",
    "2026-12-01T10:60:00.000000Z",
    "2026-12-01T10:00:00.00000Z",  # five digits
    "2026-12-01T10:00:00.000000",  # no Z
    "2026-12-01T10:00:00.000000+00:00",
    "2026-12-01 10:00:00.000000Z",
    "２０２６-12-01T10:00:00.000000Z",  # digits of another script
    "",
])
def test_not_a_timestamp(text: str) -> None:
    assert not is_valid_ts(text)


def test_leap_day() -> None:
    assert is_valid_ts("2028-02-29T23:59:59.999999Z")
    assert not is_valid_ts("2027-02-29T00:00:00.000000Z")
    assert is_valid_ts((datetime(2026, 12, 31) + timedelta(microseconds=1))
                       .strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


json_values: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=12)


@given(value=st.dictionaries(st.text(max_size=3), json_values, max_size=4))
def test_canonical_is_what_sorted_keys_json_gives(value: dict[str, Any]) -> None:
    canonical = json.loads(json.dumps(value, sort_keys=True))
    assert canonical_within(canonical, 3) == (_depth(canonical) + 2 <= MAX_DEPTH)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def test_unsorted_keys_at_any_depth_are_not_canonical() -> None:
    assert canonical_within({"a": 1, "b": 2}, 3)
    assert not canonical_within({"b": 1, "a": 2}, 3)
    assert not canonical_within({"a": [{"y": 1, "x": 2}]}, 3)
    assert not canonical_within({"a": {"z": {"b": 1, "a": 1}}}, 3)


def _call(**over: Any) -> dict[str, Any]:
    return {"session": "s-1", "tool": "read_file", "args": {"path": "/a"}, "omitted": None,
            **over}


@pytest.mark.parametrize(("key", "payload", "problem"), [
    ("call", _call(), None),
    ("call", _call(session="S-1"), "session"),
    ("call", _call(session="-s"), "session"),
    ("call", _call(session="s" * 65), "session"),
    ("call", _call(tool="t" * 1025), "tool"),
    ("call", _call(tool="t" * 1024), None),
    ("call", _call(args={"b": 1, "a": 2}), "args"),
    ("call", _call(args={}, omitted={"sha256": HEX, "bytes": 9}), None),
    ("call", _call(args={}, omitted={"sha256": "AB" * 32, "bytes": 9}), "omitted.sha256"),
    ("call", _call(args={"a": 1}, omitted={"sha256": HEX, "bytes": 9}), "args"),
    ("decision", {"outcome": {"allowed": {}}}, None),
    ("decision", {"outcome": {"ask": {"expires_at": "2026-12-01T10:00:00.000000Z"}}}, None),
    ("decision", {"outcome": {"ask": {"expires_at": "tomorrow"}}}, "outcome.ask.expires_at"),
    ("approval", {"verdict": "approved", "redecision": {"x": 1}}, None),
    ("approval", {"verdict": "approved", "redecision": None}, "redecision"),
    ("approval", {"verdict": "refused", "redecision": {"x": 1}}, "redecision"),
    ("approval", {"verdict": "expired", "redecision": None}, None),
    ("result", {"output": None}, None),
    ("result", {"output": {"sha256": HEX}}, None),
    ("result", {"output": {"sha256": HEX[:-1]}}, "output.sha256"),
    ("declassify", {"session": "s-2"}, None),
    ("declassify", {"session": "s 2"}, "session"),
    ("recovery", {"sha256": HEX}, None),
    ("recovery", {"sha256": "x"}, "sha256"),
    ("start", {"anything": 1}, None),
])
def test_event_problems(key: str, payload: dict[str, Any], problem: str | None) -> None:
    found = event_problem(key, payload)
    assert (None if found is None else found[0]) == problem
    if found is not None:
        assert found[1]  # says what is wrong


def test_passkey_events_are_checked() -> None:
    good = {"credential_id": "AbC-_1", "name": "phone", "action": "added",
            "public_key": "pQECAyYg"}
    assert event_problem("passkey", good) is None
    assert event_problem("passkey", dict(good, name="")) == (
        "name", "expected 1 to 64 printable characters")
    assert event_problem("passkey", dict(good, credential_id="a+b"))[0] == "credential_id"  # type: ignore[index]
    assert event_problem("passkey", dict(good, action="removed"))[0] == "public_key"  # type: ignore[index]
    assert event_problem("passkey", dict(good, action="removed", public_key="")) is None
    assert event_problem("approval_attempt", {"reason": "r" * 10_000}) is not None


def test_the_depth_bound_counts_from_the_record() -> None:
    def nested(levels: int) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for _ in range(levels - 1):
            value = {"a": value}
        return value

    assert canonical_within(nested(MAX_DEPTH - 2), 3)
    assert not canonical_within(nested(MAX_DEPTH - 1), 3)
    assert not canonical_within([[[]]], MAX_DEPTH - 1)
