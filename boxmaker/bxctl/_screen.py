"""Rows on the owner's terminal that model text cannot forge (issue 11).  Pure.

boxmaker's own rows start at column 0 and wrap at spaces, continuing with
their own indent (`wrap_own`, issue 22 item 16).  Every row of text that came from
the model, a tool or a peer starts with the gutter `│ ` (model text in chat),
or continues one of boxmaker's rows after a gutter (a long field), so no row
of it ever starts at column 0.  bxctl wraps such text itself, at the
terminal's width as `wcwidth` measures it, counting East Asian ambiguous
characters (and East Asian wide ones it calls zero-width) as 2 columns and
anything else it calls zero-width or unprintable as 1,
so the terminal never wraps a row by itself (a row it wrapped would start at
column 0).  The text given here is already escaped (`proto._escape`): an
escape such as ``\\u{001B}`` is kept whole on one row.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from typing import Final

from ..proto._escape import escape_text, trailing_marks

GUTTER = "\u2502 "
"""The first thing on every row of model text (U+2502, escaped in model text)."""
CONTINUATION = "  " + GUTTER
"""How a row of boxmaker's that is too long for the terminal continues."""
DEFAULT_WIDTH = 80
MIN_WIDTH = 20
"""Narrower terminals are treated as this wide (a row may then wrap by itself)."""

_UNIT = re.compile(r"\\u\{[0-9A-F]{4,6}\}|\\.|.", re.DOTALL)
_PIECE = re.compile(r"[\x20-\x5b\x5d-\x7e]+|[^\x20-\x7e]+|\\u\{[0-9A-F]{4,6}\}|\\.",
                    re.DOTALL)
"""Runs of printable ASCII but the backslash (one column each), runs of other
code points (measured one by one), and whole escapes."""

OWN_WIDTHS: Final = {"\u00b7": 2, "\u2026": 2, "\u2502": 2}
"""The widths of the non-ASCII characters of boxmaker's own rows (the separator
U+00B7, the ellipsis U+2026 and the gutter's U+2502, all East Asian ambiguous),
as `char_width` measures them with wcwidth
(tests/bxctl/test_screen.py holds them equal): a row of boxmaker's own words
is measured without importing wcwidth, which costs a command that prints
none of the model's text a sixth of its start-up."""


@functools.lru_cache(maxsize=8192)
def char_width(ch: str) -> int:
    """Columns one code point takes, never underestimated: ambiguous 2, at least 1,
    and 2 for East Asian wide ones that wcwidth calls zero-width (U+302E: the C
    library, and so the terminal, gives it 2).  Every ASCII code point is 1 (wcwidth
    says 1, 0 or -1 for them, none East Asian wide)."""
    if ch < "\x80":
        return 1
    known = OWN_WIDTHS.get(ch)
    if known is not None:
        return known
    import wcwidth  # imported when non-ASCII text is first measured

    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return max(2, wcwidth.wcwidth(ch, ambiguous_width=2))
    return max(1, wcwidth.wcwidth(ch, ambiguous_width=2))


def text_width(text: str) -> int:
    return sum(char_width(ch) for ch in text)


def terminal_width() -> int:
    """The terminal's width (COLUMNS first, as `shutil.get_terminal_size` does, whose
    steps for the width these are: shutil and the compressors it imports are not
    loaded for it; 80 when unknown)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = DEFAULT_WIDTH
        columns = columns or DEFAULT_WIDTH
    return max(MIN_WIDTH, columns if columns > 0 else DEFAULT_WIDTH)


def _fill(out: list[str], segment: str, used: int, width: int, fresh: int,
          new_row: str) -> int:
    """Append `segment` (escaped, no raw newline) to `out`, starting a row with
    `new_row` (a newline and a gutter, `fresh` columns) before any unit that
    would pass `width`; return the columns used on the last row."""
    for match in _PIECE.finditer(segment):
        piece = match.group()
        if piece[0] == "\\":  # an escape: kept whole
            if used + len(piece) > width and used > fresh:
                out.append(new_row)
                used = fresh
            out.append(piece)
            used += len(piece)
        elif piece.isascii():  # one column each: cut in slices
            start = 0
            while start < len(piece):
                room = width - used
                if room <= 0 and used > fresh:
                    out.append(new_row)
                    used = fresh
                    continue
                take = piece[start:start + max(room, 1)]
                out.append(take)
                used += len(take)
                start += len(take)
        else:
            for ch in piece:
                columns = char_width(ch)
                if used + columns > width and used > fresh:
                    out.append(new_row)
                    used = fresh
                out.append(ch)
                used += columns
    return used


def cut(escaped: str, limit: int) -> str:
    """At most `limit` characters of escaped text, never cutting an escape in two."""
    end = 0
    for match in _UNIT.finditer(escaped):
        if match.end() > limit:
            break
        end = match.end()
    return escaped[:end]


def wrap_row(head: str, escaped: str, width: int, indent: str = CONTINUATION) -> list[str]:
    """boxmaker's `head` and an escaped one-line `escaped` field, as rows of at most
    `width` columns; every row after the first starts with `indent` (a gutter)."""
    out = [head]
    _fill(out, escaped, text_width(head), width, text_width(indent), "\n" + indent)
    return "".join(out).split("\n")


OWN_INDENT = "    "
"""How a row of boxmaker's own words continues (no gutter: the words are its own)."""


def wrap_own(parts: Sequence[tuple[str, bool]], width: int, indent: str = OWN_INDENT,
             field_indent: str = CONTINUATION) -> list[str]:
    """One line of boxmaker's, as rows of at most `width` columns (issue 22 item 16c).

    `parts` are (text, untrusted): boxmaker's own words wrap at spaces, their rows
    continuing with `indent`; an untrusted (escaped) field wraps anywhere but in
    an escape, its rows continuing with `field_indent` (a gutter), as `wrap_row`.
    A word longer than a row is cut."""
    out: list[str] = []
    used = start = 0  # columns used on the last row; columns of its indent
    own_fresh, field_fresh = text_width(indent), text_width(field_indent)
    for text, untrusted in parts:
        if untrusted:
            before = len(out)
            used = _fill(out, text, used, width, field_fresh, "\n" + field_indent)
            if any(piece.startswith("\n") for piece in out[before:]):
                start = field_fresh
            continue
        for token in re.findall(r" *[^ ]+| +", text):
            word = token.lstrip(" ")
            if not word and used + len(token) > width:
                continue  # spaces that do not fit: the row ends there
            placed = token
            if word and used + text_width(token) > width and used > start:
                out.append("\n" + indent)
                used = start = own_fresh
                placed = word
            before = len(out)
            used = _fill(out, placed, used, width, own_fresh, "\n" + indent)
            if any(piece.startswith("\n") for piece in out[before:]):
                start = own_fresh
    return "".join(out).split("\n")


def wrap_line(line: str, width: int) -> str:
    """A whole line of boxmaker's holding escaped fields, wrapped: rows joined by newlines."""
    return "\n".join(wrap_row("", line, width))


class ModelText:
    """Streams escaped model text as gutter rows, hard-wrapped; keeps the column.

    `feed` returns what to write for one escaped delta; `close` ends an open row
    so that boxmaker's next row starts at column 0.
    """

    def __init__(self, gutter: str = GUTTER) -> None:
        self._gutter = gutter
        self._gutter_width = text_width(gutter)
        self._used: int | None = None  # columns used on the open row; None: no open row
        self._marks = 0  # the combining marks the text so far ends with

    def feed_text(self, text: str, width: int) -> str:
        """`feed` for a raw delta: escaped here, so that a run of combining marks
        split over deltas is capped as one (issue 22 item 16)."""
        escaped = escape_text(text, marks_before=self._marks)
        self._marks = trailing_marks(text, self._marks)
        return self.feed(escaped, width)

    def feed(self, escaped: str, width: int) -> str:
        out: list[str] = []
        segments = escaped.split("\n")
        for index, segment in enumerate(segments):
            last = index == len(segments) - 1
            if last and not segment:
                break
            if self._used is None:
                out.append(self._gutter)
                self._used = self._gutter_width
            self._used = _fill(out, segment, self._used, width, self._gutter_width,
                               "\n" + self._gutter)
            if not last:
                out.append("\n")
                self._used = None
        return "".join(out)

    def close(self) -> str:
        self._marks = 0
        if self._used is None:
            return ""
        self._used = None
        return "\n"
