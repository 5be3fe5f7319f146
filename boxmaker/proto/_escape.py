"""Terminal escaping of untrusted text (07-bxctl "Escaping", as amended by issue 11).

Every code point of category Cc, Cf, Cs, Co, Cn, Zl, Zp, the variation
selectors, the Hangul fillers, the box-drawing block (U+2500..U+257F, which
boxmaker's own frames use) and every space separator (Zs) other than U+0020
is shown as ``\\u{XXXX}``; a backslash as ``\\\\``.  Newlines are kept in
multi-line text (chat) and shown as ``\\n`` in one-line fields, where also
every space after the first of a run, and any leading or trailing space, is
shown as ``\\u{0020}`` (so spaces cannot line up a fake row).  Pure: no I/O.
"""

from __future__ import annotations

import unicodedata

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_HANGUL_FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})
SPACE_ESCAPE = "\\u{0020}"


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


def escape_text(text: str, *, keep_newlines: bool = True) -> str:
    """Escape `text` for a terminal.  `keep_newlines=False` for one-line fields."""
    one_line = not keep_newlines
    if _plain(text, one_line=one_line):
        return text
    out: list[str] = []
    # a space is kept only after a non-space and before more than spaces (one line)
    last_kept = len(text.rstrip(" ")) if one_line else len(text)
    previous = " " if one_line else ""
    for index, ch in enumerate(text):
        cp = ord(ch)
        if ch == " ":
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
