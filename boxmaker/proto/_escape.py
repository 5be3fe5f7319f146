"""Terminal escaping of untrusted text (07-bxctl "Escaping", as amended by issue 11).

Every code point of category Cc, Cf, Cs, Co, Cn, Zl, Zp, the variation
selectors, the Hangul fillers, the box-drawing block (U+2500..U+257F, which
boxmaker's own frames use) and every space separator (Zs) other than U+0020
is shown as ``\\u{XXXX}``; a backslash as ``\\\\``.  Newlines are kept in
multi-line text (chat) and shown as ``\\n`` in one-line fields, where also
every space after the first of a run, and any leading or trailing space, is
shown as ``\\u{0020}`` (so spaces cannot line up a fake row).  A character
carries at most `MAX_MARKS` combining marks (UAX #15's stream-safe limit): the
rest of the run is shown as ``\\u{XXXX}`` (issue 22 item 16), so a stack of
marks cannot draw over the rows above and below.  Pure: no I/O.
"""

from __future__ import annotations

import unicodedata

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_HANGUL_FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})
SPACE_ESCAPE = "\\u{0020}"
MAX_MARKS = 30
"""Combining marks shown raw on one base character (UAX #15 stream-safe)."""


def is_mark(ch: str) -> bool:
    """A code point a terminal draws on the cell before it: a mark (Mn, Mc, Me), any
    other non-starter (canonical combining class not 0), or a conjoining Hangul
    vowel or final consonant (which terminals join to the cell before)."""
    cp = ord(ch)
    if 0x1160 <= cp <= 0x11FF or 0xD7B0 <= cp <= 0xD7FF:
        return True
    return unicodedata.category(ch)[0] == "M" or unicodedata.combining(ch) != 0


def trailing_marks(text: str, before: int = 0) -> int:
    """The run of marks `text` ends with, counting `before` when all of it is marks
    (for text that arrives in pieces, such as chat's deltas)."""
    stripped = len(text)
    while stripped and is_mark(text[stripped - 1]):
        stripped -= 1
    run = len(text) - stripped
    return run + before if stripped == 0 else run


def _is_hidden(cp: int) -> bool:
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or cp in _HANGUL_FILLERS:
        return True
    if 0x2500 <= cp <= 0x257F:
        return True
    return unicodedata.category(chr(cp)) in _HIDDEN_CATEGORIES


def _plain(text: str, *, one_line: bool) -> bool:
    """Nothing to escape: printable ASCII, no backslash (and tidy spaces in one line)."""
    if not (text.isascii() and text.isprintable()) or "\\" in text:
        return False
    return not one_line or not (text.startswith(" ") or text.endswith(" ") or "  " in text)


def escape_text(text: str, *, keep_newlines: bool = True, marks_before: int = 0) -> str:
    """Escape `text` for a terminal.  `keep_newlines=False` for one-line fields;
    `marks_before`: the marks the text shown just before it ended with."""
    one_line = not keep_newlines
    if _plain(text, one_line=one_line):
        return text
    marks = marks_before
    out: list[str] = []
    # a space is kept only after a non-space and before more than spaces (one line)
    last_kept = len(text.rstrip(" ")) if one_line else len(text)
    previous = " " if one_line else ""
    for index, ch in enumerate(text):
        cp = ord(ch)
        marks = marks + 1 if cp > 0x7F and is_mark(ch) else 0
        if marks > MAX_MARKS:
            out.append(f"\\u{{{cp:04X}}}")
        elif ch == " ":
            run_or_edge = one_line and (previous == " " or index >= last_kept)
            out.append(SPACE_ESCAPE if run_or_edge else " ")
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\n" if keep_newlines else "\\n")
        elif 0x20 < cp < 0x7F:
            out.append(ch)
        elif _is_hidden(cp):
            out.append(f"\\u{{{cp:04X}}}")
        else:
            out.append(ch)
        previous = ch
    return "".join(out)


def escape_line(text: str) -> str:
    """Escape a one-line field (a tool name, an argument value, a file name)."""
    return escape_text(text, keep_newlines=False)
