"""Rows model text cannot forge (boxmaker.bxctl._screen, issue 11): wrapping and gutters."""

from __future__ import annotations

import re
from pathlib import Path

import wcwidth
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.bxctl._screen import (
    CONTINUATION,
    GUTTER,
    OWN_INDENT,
    OWN_WIDTHS,
    ModelText,
    char_width,
    cut,
    text_width,
    wrap_own,
    wrap_row,
)
from boxmaker.proto._escape import escape_line, escape_text

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=400)
WIDTHS = st.integers(min_value=20, max_value=120)
_ESCAPE = re.compile(r"\\u\{[0-9A-F]{4,6}\}|\\[\\n]")


def columns(row: str) -> int:
    """An independent count: wcswidth per code point, ambiguous 2, never below 1."""
    return sum(max(1, wcwidth.wcwidth(ch, ambiguous_width=2)) for ch in row)


def escapes_whole(rows: list[str], escaped: str) -> bool:
    """No row ends inside a backslash escape."""
    found = [m.group() for m in _ESCAPE.finditer(escaped)]
    rejoined = "".join(rows)
    return [m.group() for m in _ESCAPE.finditer(rejoined)] == found


@settings(max_examples=300)
@given(ANY_TEXT, WIDTHS)
def test_model_text_rows_all_start_with_the_gutter_and_fit(text: str, width: int) -> None:
    stream = ModelText()
    middle = len(text) // 2
    shown = stream.feed(escape_text(text[:middle]), width)
    shown += stream.feed(escape_text(text[middle:]), width) + stream.close()
    assert stream.close() == ""
    rows = shown.split("\n")
    assert rows[-1] == ""  # closed: boxmaker's next row starts at column 0
    for row in rows[:-1]:
        assert row.startswith(GUTTER)
        assert columns(row) <= width or columns(row[len(GUTTER):]) <= 10  # one escape
    plain = "".join(row[len(GUTTER):] for row in rows[:-1])
    assert plain.replace("\n", "") == escape_text(text).replace("\n", "")


@settings(max_examples=300)
@given(ANY_TEXT, WIDTHS)
def test_a_field_wraps_behind_the_gutter_and_keeps_every_escape_whole(
        text: str, width: int) -> None:
    escaped = escape_line(text)
    rows = wrap_row("  args     ", escaped, width)
    assert rows[0].startswith("  args     ")
    assert all(row.startswith(CONTINUATION) for row in rows[1:])
    assert all(columns(row) <= width for row in rows if len(row) > len(CONTINUATION) + 10)
    body = rows[0][len("  args     "):] + "".join(r[len(CONTINUATION):] for r in rows[1:])
    assert body == escaped
    assert escapes_whole(rows, escaped)


def test_ambiguous_and_wide_characters_count_two_columns() -> None:
    rows = wrap_row("", "\u00e9" * 30, 20)  # é is East Asian ambiguous
    # 2 columns each; a continuation ("  " and the gutter, │ ambiguous too) takes 5
    assert [r.count("\u00e9") for r in rows] == [10, 7, 7, 6]
    assert wrap_row("", "\u4e2d" * 10, 20)[0] == "\u4e2d" * 10


def test_cut_never_splits_an_escape() -> None:
    escaped = escape_line("ab\x1b")
    assert cut(escaped, 4) == "ab"
    assert cut(escaped, 10) == escaped


# -- issue 22 item 16 (c): boxmaker's own rows wrap at words, with their own indent ---

QUESTION = "type 318457 to approve, r to refuse, or Enter to leave it pending: "


def test_own_words_wrap_at_spaces_with_their_own_indent() -> None:
    for width in range(20, 70):
        rows = wrap_own([(QUESTION, False)], width)
        assert all(text_width(r) <= width for r in rows), (width, rows)
        assert all(r.startswith(OWN_INDENT) and GUTTER not in r for r in rows[1:]), rows
        assert " ".join(r.strip() for r in rows) == QUESTION.strip(), rows


def test_a_field_in_own_words_still_continues_behind_the_gutter() -> None:
    field = escape_line("x" * 50 + "approval 1 \u00b7 expires")
    rows = wrap_own([("tools cannot run here (", False), (field, True),
                     ("): allowed calls are answered runner_unavailable", False)], 30)
    assert all(text_width(r) <= 30 for r in rows), rows
    assert rows[1].startswith(CONTINUATION)  # the field's rows: a gutter
    assert not any(r.startswith("approval") for r in rows)
    assert rows[-1] == OWN_INDENT + "runner_unavailable"  # own words: own indent


def test_an_own_word_longer_than_a_row_is_cut_not_overflowing() -> None:
    rows = wrap_own([("conversation " + "c" * 60, False)], 30)
    assert all(text_width(r) <= 30 for r in rows), rows
    assert rows[0] == "conversation"


def wcwidth_columns(ch: str) -> int:
    """What char_width says with wcwidth asked (its rule, independently written)."""
    import unicodedata

    measured = wcwidth.wcwidth(ch, ambiguous_width=2)
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return max(2, measured)
    return max(1, measured)


def test_the_widths_known_without_wcwidth_are_what_wcwidth_says() -> None:
    # char_width answers ASCII and boxmaker's own characters without importing wcwidth
    # (issue 23 goal 2): each answer must be the one wcwidth gives
    assert all(char_width(chr(n)) == wcwidth_columns(chr(n)) == 1 for n in range(128))
    for ch, width in OWN_WIDTHS.items():
        assert wcwidth_columns(ch) == width, hex(ord(ch))
    own = set(GUTTER + CONTINUATION + OWN_INDENT) - {chr(n) for n in range(128)}
    assert own <= set(OWN_WIDTHS)


def test_every_non_ascii_character_of_bxctls_own_words_is_known_without_wcwidth() -> None:
    # a character added to bxctl's own rows is measured here too, or the command that
    # prints it loads wcwidth (and hmac, hashlib) at every start
    sources = Path(__file__).resolve().parents[2] / "boxmaker" / "bxctl"
    used = {ch for path in sources.glob("*.py") for ch in path.read_text() if ch >= "\x80"}
    assert used <= set(OWN_WIDTHS), sorted(used - set(OWN_WIDTHS))
