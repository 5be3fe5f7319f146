"""How `bxctl chat` shows a turn (boxmaker/bxctl/_chat_render.py): whatever the
model, a tool or a server put in a field, no control character reaches the
terminal, boxmaker's own lines start at column 0 and fit the width."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.bxctl import _chat_render as render
from boxmaker.proto._convert import U64
from boxmaker.proto.wire._wire import ErrorAnswer
from boxmaker.proto.wire._wire_loop import (
    ApprovalPendingEvent,
    Done,
    ToolCallEvent,
    ToolDeniedEvent,
    ToolResultEvent,
    Usage,
)

HOSTILE = "\x1b]0;owned\x07\x1b[2J\r\nfake: approved\u202e\x9b"


def _safe(text: str, width: int) -> None:
    assert text.endswith("\n")
    for row in text[:-1].split("\n"):
        assert len(row) <= width, row
        assert all(unicodedata.category(ch)[0] != "C" and unicodedata.category(ch)
                   not in ("Zl", "Zp") for ch in row), row


@given(text=st.text(max_size=300), width=st.integers(20, 120))
def test_every_line_is_escaped_and_fits(text: str, width: int) -> None:
    _safe(render.tool_call(ToolCallEvent(call_id="c", tool=text[:50] or "t", args={"k": text},
                                         raw_args=None), width), width)
    _safe(render.tool_call(ToolCallEvent(call_id="c", tool="t", args=None, raw_args=text),
                           width), width)
    _safe(render.approval_pending(ApprovalPendingEvent(
        call_id="c", approval_id=U64(3), tool=text, expires_at="2026-12-01T10:00:00.000000Z"),
        width), width)
    _safe(render.tool_denied(ToolDeniedEvent(call_id="c", tool=text, code="no_grant",
                                             reason=text, runbook=None), width), width)
    _safe(render.error(ErrorAnswer(code="internal", message=text, runbook=None), width), width)
    _safe(render.problem(text, width), width)


def test_tool_call_args_are_cut_with_their_length() -> None:
    shown = render.tool_call(ToolCallEvent(call_id="c", tool="write_file",
                                           args={"content": "x" * 1000}, raw_args=None), 400)
    length = len(json.dumps({"content": "x" * 1000}, separators=(",", ":")))
    assert f"\u2026 ({length} characters)" in shown
    assert shown.startswith("\u2192 write_file {\"content\":\"xxx")
    short = render.tool_call(ToolCallEvent(call_id="c", tool="echo", args={"text": "hi"},
                                           raw_args=None), 80)
    assert short == '\u2192 echo {"text":"hi"}\n'


def test_hostile_fields_are_shown_escaped() -> None:
    line = render.tool_denied(ToolDeniedEvent(call_id="c", tool="read_file", code="no_grant",
                                              reason=HOSTILE, runbook="docs/runbook.md#no-grant"),
                              400)
    assert line.startswith("\u2717 read_file denied (no_grant): ")
    assert line.rstrip("\n").endswith(" [docs/runbook.md#no-grant]")
    assert "\\u{001B}" in line and "\n" not in line[:-1]


@pytest.mark.parametrize(("rounds", "word"), [(1, "round"), (2, "rounds"), (0, "rounds")])
def test_done(rounds: int, word: str) -> None:
    text = render.done(Done(finish="stop", rounds=U64(rounds),
                            usage=Usage(prompt_tokens=U64(10), completion_tokens=U64(5))))
    assert text == f"(stop, {rounds} {word}, 10+5 tokens)\n"


def test_result_line() -> None:
    event: Any = ToolResultEvent(call_id="c", tool="read_file", status="ok", bytes=U64(12),
                                 label="private", untrusted=True)
    assert render.tool_result(event, 80) == \
        "\u2713 read_file ok, 12 bytes, label private, untrusted\n"
    trusted = ToolResultEvent(call_id="c", tool="echo", status="timeout", bytes=U64(0),
                              label="public", untrusted=False)
    assert render.tool_result(trusted, 80) == "\u2713 echo timeout, 0 bytes, label public\n"
    command = ToolResultEvent(call_id="c", tool="run_command", status="ok", bytes=U64(97),
                              label="public", untrusted=True, exit=1)
    assert render.tool_result(command, 80) == \
        "\u2713 run_command ok, exit 1, 97 bytes, label public, untrusted\n"


def test_a_repeat_notice_shows_the_earlier_output_escaped_in_gutter_rows() -> None:
    from boxmaker.proto.wire._wire_loop import NoticeEvent
    event = NoticeEvent(kind="repeat", call_id="b", tool="read_file\x1b[2J",
                        text="read_file ok: # Demo\nline two \x1b]0;pwn\x07")
    shown = render.notice(event, 60)
    assert "\x1b" not in shown and "\x07" not in shown
    rows = shown.splitlines()
    assert rows[0].startswith("\u27f3 read_file")
    assert [r for r in rows if r.startswith("\u2502 ")][:2] == [
        "\u2502 read_file ok: # Demo", "\u2502 line two \\u{001B}]0;pwn\\u{0007}"]
    assert all(len(r) <= 60 for r in rows)


def test_a_cut_call_notice_is_one_of_boxmakers_rows() -> None:
    from boxmaker.proto.wire._wire_loop import NoticeEvent
    event = NoticeEvent(kind="cut_call", call_id=None, tool=None, text="cut off")
    assert render.notice(event, 80) == "! the tool: cut off\n"
