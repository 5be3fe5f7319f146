"""Red-team review of issue 11's gutter: widths against the C library's wcwidth,
the table a terminal such as xterm advances its cursor by (docs/decisions.md,
"Red-team review of issues 16 and 11")."""

from __future__ import annotations

import ctypes
import ctypes.util
import locale
from collections.abc import Iterator
from typing import Any

import pytest

from boxmaker.bxctl._screen import GUTTER, ModelText, char_width
from boxmaker.proto._escape import escape_text


@pytest.fixture(scope="module")
def libc_wcwidth() -> Iterator[Any]:
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
    except locale.Error:
        pytest.skip("no C.UTF-8 locale")
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    function = libc.wcwidth
    function.argtypes, function.restype = [ctypes.c_wchar], ctypes.c_int
    try:
        yield function
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def terminal_columns(row: str, libc_wcwidth: Any) -> int:
    return sum(max(0, libc_wcwidth(ch)) for ch in row)


def test_no_character_shown_raw_is_narrower_than_the_terminal_counts_it(
        libc_wcwidth: Any) -> None:
    # U+302E/U+302F (Hangul tone marks) and U+16FF0/U+16FF1 are spacing marks
    # that are East Asian wide: the C library (and so the terminal) gives them 2
    # columns, wcwidth 0, bxctl counted 1.
    narrower = [hex(cp) for cp in range(0x20, 0x110000)
                if not 0xD800 <= cp <= 0xDFFF and escape_text(chr(cp)) == chr(cp)
                and libc_wcwidth(chr(cp)) > char_width(chr(cp))]
    assert narrower == []


def test_wide_tone_marks_cannot_push_model_text_to_column_zero(
        libc_wcwidth: Any) -> None:
    # 60 of them filled 120 columns of an 80-column row the terminal wrapped by
    # itself: what followed started at column 0, where only boxmaker writes.
    text = "\u302e" * 60 + "brokerd: approved 7 by uid 1000"
    rows = (ModelText().feed(escape_text(text), 80)).split("\n")
    assert all(row.startswith(GUTTER) for row in rows)
    assert all(terminal_columns(row, libc_wcwidth) <= 80 for row in rows)


def test_marks_split_over_deltas_are_capped_as_one_run() -> None:
    # issue 22 item 16 (a): 69 marks reached the chat; sent 10 per delta, each
    # delta alone is under the cap
    text = ModelText()
    shown = text.feed_text("e", 80) + "".join(text.feed_text("\u0301" * 10, 80)
                                              for _ in range(7))
    assert shown.count("\u0301") == 30 and shown.count("\\u{0301}") == 40
    shown = text.close() + text.feed_text("\u0301" * 10, 80)  # a new row: a new run
    assert shown.count("\u0301") == 10
