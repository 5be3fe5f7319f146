"""What the approval page shows of a pending approval (boxmaker/approvals/_views.py):
every field from the model escaped as bxctl escapes it, never cut."""

from __future__ import annotations

import datetime as dt
import json
import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.approvals._history import Cause
from boxmaker.approvals._views import approval_view, shown_value
from boxmaker.proto._convert import U64
from boxmaker.proto._escape import escape_line
from boxmaker.proto._taint import Taint
from boxmaker.proto.wire._wire_admin import Approval

NOW = dt.datetime(2026, 12, 1, 10, 0, 0, tzinfo=dt.UTC)


def approval(args: dict[str, Any], tool: str = "write_file") -> Approval:
    return Approval(approval_id=U64(3), call=U64(41), session="s-1", tool=tool, args=args,
                    grant="ask-notes", state=Taint(label="private", untrusted=True),
                    requested_at="2026-12-01T09:59:00.000000Z",
                    expires_at="2026-12-01T10:04:30.500000Z", challenge="Y2hhbGxlbmdl")


def _inert(text: str) -> bool:
    return all(unicodedata.category(ch)[0] != "C" for ch in text)


@given(args=st.dictionaries(st.text(max_size=10), st.text(max_size=200)
                            | st.integers() | st.lists(st.text(max_size=5), max_size=3),
                            max_size=5),
       tool=st.text(min_size=1, max_size=30))
def test_every_field_is_escaped_and_whole(args: dict[str, Any], tool: str) -> None:
    view = approval_view(approval(args, tool="t" if not tool.strip() else tool[:30]), [], NOW)
    text = json.dumps(view, ensure_ascii=False)
    assert _inert(text)
    assert [key for key, _ in view["args"]] == [escape_line(k) for k in sorted(args)]
    for (_, shown), key in zip(view["args"], sorted(args), strict=True):
        value = args[key]
        assert shown == escape_line(value if isinstance(value, str) else
                                    json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def test_the_view_fields() -> None:
    causes = [Cause(seq=9, ts="2026-12-01T09:00:00.000000Z", tool="http_fetch\x1b[31m",
                    label="public", untrusted=True)]
    view = approval_view(approval({"path": "/srv/a", "content": "x" * 10_000}), causes, NOW)
    assert view["approval_id"] == 3 and view["call"] == 41
    assert (view["label"], view["untrusted"]) == ("private", True)
    assert view["seconds_left"] == 270
    assert view["challenge"] == "Y2hhbGxlbmdl"
    assert view["taint_raised_by"] == [{"seq": 9, "ts": "2026-12-01T09:00:00.000000Z",
                                        "tool": "http_fetch\\u{001B}[31m", "label": "public",
                                        "untrusted": True}]
    assert dict(view["args"])["content"] == "x" * 10_000  # never cut


def test_an_expired_approval_has_no_seconds_left() -> None:
    later = NOW + dt.timedelta(hours=1)
    assert approval_view(approval({}), [], later)["seconds_left"] == 0


def test_shown_value() -> None:
    assert shown_value("<script>\u202e") == "<script>\\u{202E}"
    assert shown_value({"b": [1, None]}) == '{"b":[1,null]}'


def test_a_run_command_approval_shows_the_command_block() -> None:
    args = {"argv": ["git", "log", "a b; rm -rf ~", "\x1b[2J\u202e"], "cwd": "/home/me/src",
            "stdin": "line\n"}
    view = approval_view(approval(args, tool="run_command"), [], NOW)
    assert view["block"] == "command"
    assert view["args"] == [
        ["argv[0]", '"git"'], ["argv[1]", '"log"'], ["argv[2]", '"a b; rm -rf ~"'],
        ["argv[3]", '"\\\\u001b[2J\\u{202E}"'], ["cwd", "/home/me/src"],
        ["mounts", "the paths of grant ask-notes, read-write only if it says write = true"],
        ["network", "none"], ["stdin", "line\\n"]]
    assert _inert(json.dumps(view, ensure_ascii=False))
    # arguments that are no run_command call are shown as they are
    view = approval_view(approval({"argv": "git log"}, tool="run_command"), [], NOW)
    assert view["block"] == "args" and view["args"] == [["argv", "git log"]]
    assert approval_view(approval({"path": "/a"}), [], NOW)["block"] == "args"


def test_a_run_command_block_with_its_grants_mounts_lists_each_one() -> None:
    args = {"argv": ["make"], "cwd": "/home/me/src"}
    view = approval_view(approval(args, tool="run_command"), [], NOW,
                         mounts=[("/home/me/src", True), ("/home/me/\u202eevil", True)])
    assert [row for row in view["args"] if row[0] == "mount"] == [
        ["mount", "/home/me/src (rw)"], ["mount", "/home/me/\\u{202E}evil (rw)"]]
    assert not any(row[0] == "mounts" for row in view["args"])
