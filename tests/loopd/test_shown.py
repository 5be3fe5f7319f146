"""loopd's own words about a turn (boxmaker/loopd/_shown.py): pure."""

from __future__ import annotations

from boxmaker.loopd._shown import call_key, denial_text, result_text
from boxmaker.proto.wire._wire_loop import MAX_NOTICE_CHARS


def test_call_key_tells_calls_apart() -> None:
    assert call_key("echo", {"a": 1, "b": 2}, "") == call_key("echo", {"b": 2, "a": 1}, "x")
    assert call_key("echo", {"a": 1}, "") != call_key("read_file", {"a": 1}, "")
    assert call_key("echo", None, "not json") != call_key("echo", None, "other")


def test_a_long_output_is_cut_to_the_notice_bound() -> None:
    shown = result_text("read_file", "ok", {"content": "x" * 100_000, "encoding": "utf-8"})
    assert len(shown) <= MAX_NOTICE_CHARS
    assert shown.endswith("\u2026 (cut)")
    assert result_text("echo", "ok", {"n": 1}).endswith('{"n":1}')


def test_a_refusal_names_its_code_and_reason() -> None:
    shown = denial_text("read_file", "no_grant", "no grant covers /x")
    assert "no_grant" in shown and "no grant covers /x" in shown
    assert len(denial_text("t", "c", "r" * 10_000)) <= MAX_NOTICE_CHARS
