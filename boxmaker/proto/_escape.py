"""Terminal escaping of untrusted text (07-bxctl "Escaping").

Every code point of category Cc, Cf, Cs, Co, Cn, Zl, Zp, the variation
selectors and the Hangul fillers is shown as ``\\u{XXXX}``; a backslash as
``\\\\``.  Newlines are kept in multi-line text (chat) and shown as ``\\n`` in
one-line fields.  Pure: no I/O.
"""

from __future__ import annotations

import unicodedata

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_HANGUL_FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})


def _is_hidden(cp: int) -> bool:
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or cp in _HANGUL_FILLERS:
        return True
    return unicodedata.category(chr(cp)) in _HIDDEN_CATEGORIES


def escape_text(text: str, *, keep_newlines: bool = True) -> str:
    """Escape `text` for a terminal.  `keep_newlines=False` for one-line fields."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\n" if keep_newlines else "\\n")
        elif 0x20 <= cp < 0x7F:
            out.append(ch)
        elif _is_hidden(cp):
            out.append(f"\\u{{{cp:04X}}}")
        else:
            out.append(ch)
    return "".join(out)


def escape_line(text: str) -> str:
    """Escape a one-line field (a tool name, an argument value, a file name)."""
    return escape_text(text, keep_newlines=False)
