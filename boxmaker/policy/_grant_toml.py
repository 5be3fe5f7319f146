"""A grant file's TOML, read quickly when it has the plain shape (issue 23 goal 3).  Pure.

`loads(text)` is `tomllib.loads(text)`: the same value for every text, the same
error for every text tomllib refuses.  A grant file is almost always written
in one plain shape (what `bxctl grants suggest` writes, and the examples of
03-policy): `[[grant]]` headers, and one `key = value` per line whose value is
a string without escapes, `true`, `false`, or an array of such strings on the
line.  Such a text is read here, line by line, with one regular expression
(about six times as fast as tomllib's parser, which walks every character in
Python), a table's first lines as bxctl writes them in one match (`_BLOCK`);
any line of any other shape (a key before the first header, another table,
a dotted or quoted key, a key given twice, an escape, a literal or
multi-line string, a number, a date, an inline table, a multi-line array, a
carriage return, a control character) makes the whole text go to tomllib, so
that what tomllib accepts, refuses and says is never second-guessed here.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator
from typing import Any, Final

from .._errors import InternalSignal

_STRING: Final = r'"[^"\\\x00-\x1f\x7f]*"'
"""A basic string without escapes or control characters (tab included)."""

_LINES: Final = re.compile(
    r"^[ \t]*"
    r"(?:(\[\[grant\]\])"
    r"|([A-Za-z0-9_-]+)[ \t]*=[ \t]*"
    rf"(?:({_STRING})"
    r"|(true|false)"
    rf"|(\[[ \t]*(?:{_STRING}[ \t]*,[ \t]*)*(?:{_STRING}[ \t]*)?\])))?"
    r"[ \t]*(?:#[^\x00-\x08\x0a-\x1f\x7f]*)?$",
    re.MULTILINE,
)
"""One line of the plain shape: blank, a comment, a `[[grant]]` header or a
`key = value`, each optionally followed by a comment (TOML's rules for comments:
no control character but tab).  No part of it matches a newline, and `^` holds
only at the start of a line: it matches each line at most once, as a whole; a
text is of the plain shape when each match starts where the line after the
previous one starts, and the last one ends the text."""

_ITEM: Final = re.compile(r'"([^"]*)"')

_ARRAY: Final = rf"\[(?:{_STRING}, )*{_STRING}\]"
"""An array of one or more strings on the line, `, ` between them (as bxctl writes it)."""

_BLOCK: Final = re.compile(
    rf'\[\[grant\]\]\nid = ({_STRING})\ntool = ({_STRING})\nmode = ({_STRING})\n'
    rf'(?:paths = ({_ARRAY})\n)?'
)
"""A table's first lines as `bxctl grants suggest` writes them: the header, `id`,
`tool`, `mode`, perhaps `paths`, each a line of the plain shape as `_LINES` reads it
(one space around `=`, no comment), taken in one match (issue 23: a fifth of the
per-line work).  What follows them, up to the next header, is read line by line."""


WORDS: Final = frozenset({"tool", "mode", "label", "max_label", "when_untrusted"})
"""The keys whose values are words of a few letters: one string object each, shared by
every grant (100,000 grants hold one "read_file", not 100,000)."""


class NotPlain(InternalSignal):
    """The text has another shape than the plain one: read it with tomllib."""


def plain_tables(text: str) -> Iterator[dict[str, Any]]:
    """Each `[[grant]]` table of a text of the plain shape, as soon as it is read.

    Raises NotPlain at the first sign of another shape, possibly after some tables
    were given (the caller then drops them and reads the text with tomllib): a
    table is given when the next header (or the end) is reached, so that 100,000
    tables never exist at once (nor a list of the half a million lines)."""
    if "\r" in text:
        raise NotPlain
    table: dict[str, Any] | None = None
    at = 0
    end = len(text)
    intern = sys.intern
    block = _BLOCK.match
    line = _LINES.match
    while at <= end:
        first = block(text, at)
        if first is not None:
            if table is not None:
                yield table
            at = first.end()
            grant_id, tool, mode, paths = first.groups()
            table = {"id": grant_id[1:-1], "tool": intern(tool[1:-1]),
                     "mode": intern(mode[1:-1])}
            if paths is not None:
                table["paths"] = _ITEM.findall(paths)
            continue
        found = line(text, at)
        if found is None:
            raise NotPlain
        at = found.end() + 1
        header, key, string, boolean, array = found.groups()
        if key is None:
            if header is not None:
                if table is not None:
                    yield table
                table = {}
            continue
        if table is None or key in table:
            raise NotPlain
        if string is not None:
            table[key] = intern(string[1:-1]) if key in WORDS else string[1:-1]
        elif boolean is not None:
            table[key] = boolean == "true"
        else:
            table[key] = _ITEM.findall(array)
    if table is not None:
        yield table


def plain(text: str) -> dict[str, Any] | None:
    """The value of a text of the plain shape, or None when it has another shape."""
    try:
        tables = list(plain_tables(text))
    except NotPlain:
        return None
    return {"grant": tables} if tables else {}


def loads(text: str) -> dict[str, Any]:
    """`tomllib.loads(text)`, read here when the text has the plain shape."""
    value = plain(text)
    if value is not None:
        return value
    return tomllib.loads(text)
