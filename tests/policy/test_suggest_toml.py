"""One [[grant]] table as TOML (boxmaker/policy/_suggest_toml.py): it reads back
with tomllib as written, holds only the fields its tool may hold, and passes
the grant parser."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.policy._suggest_toml import render_grant_lines, toml_string


@given(text=st.text(max_size=40))
def test_toml_strings_read_back_and_are_printable_ascii(text: str) -> None:
    encoded = toml_string(text)
    assert all(0x20 <= ord(ch) < 0x7F for ch in encoded)
    assert tomllib.loads(f"v = {encoded}")["v"] == text


def test_toml_string_escapes() -> None:
    assert toml_string('a"b\\c') == '"a\\"b\\\\c"'
    assert toml_string("\x1b\n\u202e\U0001f600") == '"\\u001B\\u000A\\u202E\\U0001F600"'


def _render(tool: str, mode: str = "ask", **over: object) -> dict[str, object]:
    fields: dict[str, object] = dict(
        id=tool.replace("_", "-") + "-x", tool=tool, mode=mode, entries=["/srv/a b", "/srv/\u00e9"]
        if tool != "http_fetch" else ["example.org", "api.example.org:8443"],
        label="private", untrusted=False, max_label="secret", when_untrusted=mode,
        http=False, private_network=False, note=None)
    fields.update(over)
    text = "\n".join(render_grant_lines(**fields)) + "\n"  # type: ignore[arg-type]
    state = parse_grant_texts({"s.toml": text})
    assert isinstance(state, GrantSet), (text, state)
    table: dict[str, object] = tomllib.loads(text)["grant"][0]
    return table


@pytest.mark.parametrize("tool", ["read_file", "list_dir"])
def test_read_tools_carry_paths_label_and_untrusted(tool: str) -> None:
    table = _render(tool)
    assert table == {"id": tool.replace("_", "-") + "-x", "tool": tool, "mode": "ask",
                     "paths": ["/srv/a b", "/srv/\u00e9"], "label": "private",
                     "untrusted": False, "max_label": "secret"}


def test_write_file_has_no_label_or_untrusted() -> None:
    table = _render("write_file", mode="allow", when_untrusted="ask", note="from the log")
    assert table == {"id": "write-file-x", "tool": "write_file", "mode": "allow",
                     "paths": ["/srv/a b", "/srv/\u00e9"], "max_label": "secret",
                     "when_untrusted": "ask", "note": "from the log"}


def test_http_fetch_hosts_and_flags_only_when_true() -> None:
    plain = _render("http_fetch", untrusted=True)
    assert plain["hosts"] == ["example.org", "api.example.org:8443"]
    assert "http" not in plain and "private_network" not in plain and "paths" not in plain
    flagged = _render("http_fetch", untrusted=True, http=True, private_network=True)
    assert flagged["http"] is True and flagged["private_network"] is True


def test_echo_has_neither_paths_nor_hosts() -> None:
    table = _render("echo", entries=[])
    assert "paths" not in table and "hosts" not in table
    assert "http" not in _render("echo", entries=[], http=True)


def test_hostile_entries_stay_data() -> None:
    evil = '/srv/x"]\nmode = "allow'
    lines = render_grant_lines(id="g", tool="read_file", mode="ask", entries=[evil],
                               label="private", untrusted=False, max_label="public",
                               when_untrusted="ask", http=False, private_network=False,
                               note="\x1b[2J")
    text = "\n".join(lines) + "\n"
    table = tomllib.loads(text)["grant"][0]
    assert table["paths"] == [evil] and table["mode"] == "ask" and table["note"] == "\x1b[2J"
    assert "\x1b" not in text and len(lines) == 9
