"""The `checkpoints` lines of `bxctl status` (boxmaker/bxctl/_checkpoint_status.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from boxmaker.bxctl._checkpoint_status import age, checkpoint_lines
from boxmaker.proto._convert import U64
from boxmaker.proto.wire._wire import format_ts
from boxmaker.proto.wire._wire_admin import CheckpointsStatus, WitnessStatus

NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def ago(seconds: float) -> str:
    return format_ts(NOW - dt.timedelta(seconds=seconds))


@pytest.mark.parametrize(("seconds", "shown"), [
    (0, "0s ago"), (119, "119s ago"), (120, "2m ago"), (7199, "119m ago"), (7200, "2h ago"),
    (172799, "47h ago"), (172800, "2d ago"), (-30, "0s ago"),
])
def test_age(seconds: int, shown: str) -> None:
    assert age(ago(seconds), NOW) == shown


def test_no_checkpoint_yet_and_a_witness_that_has_nothing() -> None:
    status = CheckpointsStatus(size=None, signed_at=None, witnesses=[
        WitnessStatus(url="https://w.example", name="w", size=None, cosigned_at=None,
                      reason="not pushed yet")])
    assert checkpoint_lines(status, NOW) == [
        "checkpoint none signed yet",
        "witness  w (https://w.example) · nothing cosigned yet · not pushed yet"]


def test_signed_and_cosigned() -> None:
    status = CheckpointsStatus(size=U64(120), signed_at=ago(5), witnesses=[
        WitnessStatus(url="https://w.example", name="w", size=U64(118), cosigned_at=ago(600),
                      reason=None)])
    assert checkpoint_lines(status, NOW) == [
        "checkpoint size 120 · signed 5s ago",
        "witness  w (https://w.example) · cosigned size 118 · 10m ago"]


def test_what_a_witness_said_is_escaped() -> None:
    status = CheckpointsStatus(size=None, signed_at=None, witnesses=[
        WitnessStatus(url="https://w\x1b[2J", name="w\n", size=None, cosigned_at=None,
                      reason="418 \x1b]0;t\x07")])
    (_, line) = checkpoint_lines(status, NOW)
    assert "\x1b" not in line and "\n" not in line and "\x07" not in line
