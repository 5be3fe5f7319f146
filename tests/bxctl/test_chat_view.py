"""boxmaker/bxctl/_chat_view.py: one turn's frames as the owner sees them (text behind the
gutter, boxmaker's own lines at column 0, notices apart with --say, JSON lines with
--json), the same for `--say` and the interactive chat."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from boxmaker.bxctl._admin_client import DaemonUnreachable
from boxmaker.bxctl._chat_view import ChatView, describe, single
from boxmaker.proto._json import loads_object
from boxmaker.proto.wire import decode_loop_frame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


@pytest.fixture(autouse=True)
def _columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def frame(name: str) -> tuple[dict[str, object], object]:
    body = (FIXTURES / name).read_bytes()
    return loads_object(body), decode_loop_frame(body)[1]


def text(delta: str) -> tuple[dict[str, object], object]:
    body = json.dumps({"id": 5, "event": {"text": {"delta": delta}}}).encode()
    return loads_object(body), decode_loop_frame(body)[1]


def test_text_then_own_lines_at_column_0_then_done() -> None:
    out = io.StringIO()
    view = ChatView(out=out)
    assert view.frame(*text("hello")) is None  # type: ignore[arg-type]
    assert view.frame(*frame("loop-event-tool-call.json")) is None  # type: ignore[arg-type]
    assert view.frame(*frame("loop-answer-done.json")) is True  # type: ignore[arg-type]
    lines = out.getvalue().split("\n")
    assert lines[0] == "\u2502 hello"
    assert lines[1].startswith("\u2192 ")
    assert lines[2] == "(stop, 2 rounds, 1833+211 tokens)"


def test_an_error_answer_ends_the_turn_as_failed() -> None:
    out = io.StringIO()
    view = ChatView(out=out)
    assert view.frame(*frame("loop-answer-error-busy.json")) is False  # type: ignore[arg-type]
    assert out.getvalue() == "error (busy): a turn is already running\n"


def test_json_writes_each_frame_as_received_and_nothing_else() -> None:
    out = io.StringIO()
    view = ChatView(out=out, as_json=True, notices=io.StringIO())
    raw, pending = frame("loop-event-approval-pending.json")
    assert view.frame(raw, pending) is None  # type: ignore[arg-type]
    assert view.frame(*frame("loop-answer-done.json")) is True  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0]) == raw
    assert len(lines) == 2


def test_notices_go_apart_and_end_the_open_row_first() -> None:
    out, notices = io.StringIO(), io.StringIO()
    view = ChatView(out=out, notices=notices)
    view.frame(*text("half"))  # type: ignore[arg-type]
    view.undecodable("not JSON \x1b[2J")
    assert out.getvalue() == "\u2502 half\n"
    assert notices.getvalue().startswith("bxctl: loopd sent a frame that bxctl could not "
                                         "decode (not JSON \\u{001B}[2J)")
    view.closed_early()
    assert "before the turn ended" in notices.getvalue()


def test_in_the_chat_a_notice_is_in_the_flow_and_a_question_row_is_ended() -> None:
    out = io.StringIO()
    view = ChatView(out=out)
    view.write("type 1 to approve: ")
    view.asked = True
    view.frame(*text("model text"))  # type: ignore[arg-type]
    assert out.getvalue() == "type 1 to approve: \n\u2502 model text"
    view.asked = True
    view.notice("late")
    assert out.getvalue().endswith("\u2502 model text\nbxctl: late\n")


def test_single_unwraps_a_group_of_unreachables_only() -> None:
    first = DaemonUnreachable("a", sent=False)
    group = ExceptionGroup("g", [ExceptionGroup("h", [first]),
                                 DaemonUnreachable("b", sent=True)])
    assert single(group) is first
    mixed = ExceptionGroup("g", [first, ValueError("v")])
    assert single(mixed) is mixed
    assert describe(mixed) == "DaemonUnreachable: a; ValueError: v"
    assert describe(KeyError()) == "KeyError"
