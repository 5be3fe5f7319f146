"""Terminal escaping of untrusted text (boxmaker.proto._escape, 07-bxctl "Escaping")."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from boxmaker.proto._escape import escape_line, escape_text, trailing_marks

HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
VARIATION_SELECTORS = {*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)}
HANGUL_FILLERS = {0x115F, 0x1160, 0x3164, 0xFFA0}
BOX_DRAWING = set(range(0x2500, 0x2580))  # issue 11: boxmaker's own frames use these


def must_be_escaped(ch: str) -> bool:
    """The spec's list, written independently of the module under test."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) in HIDDEN_CATEGORIES
        or cp in VARIATION_SELECTORS
        or cp in HANGUL_FILLERS
        or cp in BOX_DRAWING
        or (unicodedata.category(ch) == "Zs" and ch != " ")  # issue 11
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b", "\\u{001B}"),
        ("\x1b[31mred\x1b[0m", "\\u{001B}[31mred\\u{001B}[0m"),
        ("\x1b[2J\x1b[H", "\\u{001B}[2J\\u{001B}[H"),
        ("\x1b]0;title\x07", "\\u{001B}]0;title\\u{0007}"),
        ("\x9b31m", "\\u{009B}31m"),  # the 8-bit CSI
        ("\x00\x08\x7f\r\t", "\\u{0000}\\u{0008}\\u{007F}\\u{000D}\\u{0009}"),
        ("abc\u202edcba", "abc\\u{202E}dcba"),  # right-to-left override
        ("\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
         "\\u{202A}\\u{202B}\\u{202C}\\u{202D}\\u{2066}\\u{2067}\\u{2068}\\u{2069}"
         "\\u{200E}\\u{200F}\\u{061C}"),
        ("rm\u200b-rf", "rm\\u{200B}-rf"),  # zero-width space
        ("\u200c\u200d\u2060", "\\u{200C}\\u{200D}\\u{2060}"),
        ("\ufeffhello", "\\u{FEFF}hello"),
        ("soft\u00adhyphen", "soft\\u{00AD}hyphen"),
        ("tag\U000e0041\U000e007f", "tag\\u{E0041}\\u{E007F}"),
        ("a\u2028b\u2029c", "a\\u{2028}b\\u{2029}c"),
        ("\u2764\ufe0f", "\u2764\\u{FE0F}"),
        ("\ufe00", "\\u{FE00}"),
        ("\U000e0100\U000e01ef", "\\u{E0100}\\u{E01EF}"),
        ("\u115f\u1160\u3164\uffa0", "\\u{115F}\\u{1160}\\u{3164}\\u{FFA0}"),
        ("\u00a0nbsp\u2003\u3000\u1680", "\\u{00A0}nbsp\\u{2003}\\u{3000}\\u{1680}"),
        ("\u2502 \u2500\u257f\u2580", "\\u{2502} \\u{2500}\\u{257F}\u2580"),  # box drawing
        ("\U000e0000", "\\u{E0000}"),  # unassigned
        ("\u0378", "\\u{0378}"),  # unassigned
        ("\U0010ffff", "\\u{10FFFF}"),  # a noncharacter (Cn)
        ("\ue000\U000f0000\U00100000", "\\u{E000}\\u{F0000}\\u{100000}"),  # private use
        ("\ud800", "\\u{D800}"),  # a surrogate (only from our own strings)
        ("back\\slash", "back\\\\slash"),
        ("\\u{001B}", "\\\\u{001B}"),  # a literal that looks like an escape stays distinct
    ],
)  # fmt: skip
def test_categories(text: str, shown: str) -> None:
    assert escape_text(text) == shown
    assert escape_line(text) == shown


@pytest.mark.parametrize(
    "text",
    ["plain text", "été", "日本語", "emoji \U0001f600", "tab-free", "Ωmega ß", "one space"],
)
def test_printable_text_is_left_alone(text: str) -> None:
    assert escape_text(text) == text
    assert escape_line(text) == text


def test_newlines_kept_in_text_shown_in_lines() -> None:
    assert escape_text("one\ntwo\n") == "one\ntwo\n"
    assert escape_line("one\ntwo\n") == "one\\ntwo\\n"
    assert escape_text("a\r\nb") == "a\\u{000D}\nb"
    assert escape_line("a\r\nb") == "a\\u{000D}\\nb"
    assert escape_text("x\ny", keep_newlines=False) == "x\\ny"


def test_escaping_is_reversible_in_principle() -> None:
    """Distinct inputs give distinct outputs (the backslash is escaped too)."""
    assert escape_line("\\n") != escape_line("\n")
    assert escape_line("\\u{0007}") != escape_line("\x07")


def test_every_code_point_of_every_category_is_handled() -> None:
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        shown = escape_line(ch)
        if ch == "\\":
            assert shown == "\\\\"
        elif ch == " ":  # a lone space in a one-line field is leading and trailing
            assert shown == "\\u{0020}" and escape_text(ch) == " "
        elif ch == "\n":
            assert shown == "\\n"
        elif must_be_escaped(ch):
            assert shown == f"\\u{{{cp:04X}}}", hex(cp)
        else:
            assert shown == ch, hex(cp)


def _no_hidden(text: str) -> bool:
    return not any(must_be_escaped(ch) for ch in text)


@settings(max_examples=300)
@given(st.text(st.characters(codec=None, exclude_categories=())))
@example("\x1b[31m\u202e\u200b\ufeff\u00ad\U000e0041\u2028\u2029\ufe0f\u3164\n\ue000\u0378")
def test_escape_line_output_is_inert(text: str) -> None:
    shown = escape_line(text)
    assert "\n" not in shown
    assert _no_hidden(shown)
    assert shown.isascii() or all(not must_be_escaped(ch) for ch in shown)


@settings(max_examples=200)
@given(st.text(st.characters(codec=None, exclude_categories=())))
def test_escape_text_keeps_only_newlines(text: str) -> None:
    shown = escape_text(text)
    assert _no_hidden(shown.replace("\n", ""))
    assert shown.count("\n") == text.count("\n")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a b c", "a b c"),
        ("a  b", "a \\u{0020}b"),
        ("x" + " " * 4 + "grant", "x \\u{0020}\\u{0020}\\u{0020}grant"),
        (" lead", "\\u{0020}lead"),
        ("trail ", "trail\\u{0020}"),
        ("  both  ", "\\u{0020}\\u{0020}both\\u{0020}\\u{0020}"),
        ("   ", "\\u{0020}\\u{0020}\\u{0020}"),
        ("a\n b", "a\\n b"),
    ],
)
def test_spaces_in_one_line_fields(text: str, shown: str) -> None:
    """Issue 11: runs, leading and trailing spaces cannot line up a fake row."""
    assert escape_line(text) == shown
    assert escape_text(text) == text  # model text in chat: wrapped by bxctl, kept
    assert escape_text(text + "\u00e9") == text + "\u00e9"  # (the slow path too)
    assert escape_line(text + "\u00e9").removesuffix("\u00e9") == escape_line(text + "x")[:-1]


@settings(max_examples=300)
@given(st.text(st.sampled_from([" ", "a", "\n", "\u00a0"])))
def test_a_one_line_field_never_has_two_spaces_or_an_edge_space(text: str) -> None:
    shown = escape_line(text)
    assert "  " not in shown and not shown.startswith(" ") and not shown.endswith(" ")
    assert shown.replace("\\u{0020}", " ").replace("\\u{00A0}", "\u00a0") \
        .replace("\\n", "\n") == text


# -- issue 22 item 16 (a): at most 30 combining marks on one character ---------------

def test_a_character_carries_at_most_thirty_marks() -> None:
    shown = escape_line("e" + "\u0301" * 69 + "x")
    assert shown.count("\u0301") == 30
    assert shown == "e" + "\u0301" * 30 + "\\u{0301}" * 39 + "x"


@pytest.mark.parametrize("mark", ["\u0301", "\u20dd", "\u0489", "\u0903", "\u0e49",
                                  "\U0001d167", "\u302a", "\u1161", "\ud7b0"])
def test_every_kind_of_mark_is_capped(mark: str) -> None:
    # nonspacing, enclosing, spacing, Thai tone marks, musical, ideographic, and
    # conjoining Hangul vowels (a terminal joins them to the cell before)
    for text in ("a" + mark * 40, "\u00e9" + mark * 40, "a\n" + mark * 40):
        assert escape_text(text).count(mark) == 30


def test_mixed_marks_count_as_one_run_and_a_new_base_starts_again() -> None:
    run = "\u0301\u0300\u20dd" * 20  # 60 marks of three kinds
    shown = escape_line("a" + run + "b" + run)
    assert sum(shown.count(m) for m in "\u0301\u0300\u20dd") == 60
    assert shown.count("\\u{") == 60


def test_marks_after_an_escape_sit_on_it_and_are_capped_too() -> None:
    shown = escape_line("\u200b" + "\u0301" * 31)
    assert shown == "\\u{200B}" + "\u0301" * 30 + "\\u{0301}"


def test_a_run_split_over_pieces_is_one_run() -> None:
    assert trailing_marks("a" + "\u0301" * 20) == 20
    assert trailing_marks("\u0301" * 20, 20) == 40
    assert trailing_marks("b", 40) == 0
    assert escape_text("\u0301" * 20, marks_before=20).count("\u0301") == 10
