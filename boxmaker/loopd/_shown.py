"""What loopd itself tells the owner about a turn (issue 27): pure, no I/O.

A model that asks again for a call it already made in the same turn is not
run again: `call_key` says when two calls are the same, and `outcome_text`
puts the earlier outcome into boxmaker's own words (the tool, the status, the
output, cut to the notice's bound).  The text is shown to the owner, who sees
the tool's output itself; clients escape it like any untrusted text.

A turn whose final words do not carry the result of its last successful call
("I have listed your demo notes.") ends with that result shown the same way:
`carries` says whether the words quote any of the result's matter (a line of a
file or page, an entry's name), compared without case and punctuation, and
`shown_text` is what the owner then sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

from ..proto._json import dumps
from ..proto.wire import MAX_NOTICE_CHARS

REPEAT_TEXT_FOR_MODEL: Final = (
    "Not run again: this identical call already ran in this turn, and boxmaker showed "
    "its result to the owner. Answer from the result you already have."
)
CUT_CALL_TEXT_FOR_MODEL: Final = (
    "[boxmaker: my tool call was cut off before it was complete, so it was not run. "
    "A call must be short enough to finish.]"
)
CUT_CALL_TEXT_FOR_OWNER: Final = (
    "the model's tool call was cut off before it was complete (the token limit, or the "
    "server could not read it); nothing was run, and the model was told"
)
RESULT_SHOWN_TEXT_FOR_MODEL: Final = (
    "[boxmaker: my answer did not give the result of my {tool} call, so boxmaker showed "
    "that result to the owner itself.]"
)
_CUT: Final = "\u2026 (cut)"
_META_KEYS: Final = frozenset({"encoding", "stdout_encoding", "stderr_encoding", "kind",
                               "name_b64", "headers", "bytes", "truncated"})
"""Result fields that say how the matter is held, not what it is."""
MIN_PIECE: Final = 4
"""A piece of the result shorter than this (normalised) says too little to count."""
PIECE_CHARS: Final = 48
"""A piece is at most this long: a quoted line holds its first 48 characters."""
MAX_PIECES: Final = 256
"""At most this many pieces are looked for (the result's first lines and entries)."""
_LEAF_CHARS: Final = 65536
_NOT_WORD: Final = re.compile(r"[\W_]+")


def call_key(tool: str, args: dict[str, Any] | None, raw_arguments: str) -> str:
    """One string per distinct call: the tool and its arguments in canonical JSON."""
    if args is None:
        return json.dumps([tool, None, raw_arguments])
    return json.dumps([tool, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _bounded(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(0, room - len(_CUT))] + _CUT


def _body(output: Any) -> str:
    """A result's matter as text: a file's content, a page's body, a command's output,
    a directory's entries one a line; else its JSON."""
    if isinstance(output, dict):
        for key in ("content", "body", "stdout"):
            if isinstance(output.get(key), str):
                return str(output[key])
        entries = output.get("entries")
        if isinstance(entries, list) and all(isinstance(e, dict) for e in entries):
            return "".join(f"{e.get('name')} ({e.get('kind')}, {e.get('bytes')} bytes)\n"
                           for e in entries) or "(no entries)"
    return dumps(output)


def result_text(tool: str, status: str, output: Any) -> str:
    """An earlier result in boxmaker's words: its text content, else its JSON."""
    head = f"{tool} {status} (not run again; its earlier result): "
    return head + _bounded(_body(output), MAX_NOTICE_CHARS - len(head))


def shown_text(tool: str, status: str, output: Any) -> str:
    """The result of the turn's last successful call, which the model's words left out."""
    head = f"{tool} {status}, its result: "
    return head + _bounded(_body(output), MAX_NOTICE_CHARS - len(head))


def _normal(text: str) -> str:
    return _NOT_WORD.sub(" ", text.lower()).strip()


def _leaves(value: Any, key: str | None = None) -> Iterator[str]:
    if key in _META_KEYS:
        return
    if isinstance(value, str):
        yield value[:_LEAF_CHARS]
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _leaves(item, name)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, key)


def pieces(output: Any) -> list[str]:
    """The result's matter in pieces one could quote: its lines and names, normalised."""
    found: list[str] = []
    for leaf in _leaves(output):
        for line in leaf.splitlines():
            whole = _normal(line)
            if len(whole) < MIN_PIECE:
                continue
            # a whole line ends at a word's end; a cut one may end inside a word
            piece = f" {whole} " if len(whole) <= PIECE_CHARS else f" {whole[:PIECE_CHARS]}"
            if piece not in found:
                found.append(piece)
                if len(found) >= MAX_PIECES:
                    return found
    return found


def carries(words: str, output: Any) -> bool:
    """Whether the model's words quote any piece of the result, word for word (a result
    with no piece one could quote is taken as carried: there is nothing to check by)."""
    wanted = pieces(output)
    said = f" {_normal(words)} "
    return not wanted or any(piece in said for piece in wanted)


def denial_text(tool: str, code: str, reason: str) -> str:
    """An earlier refusal in boxmaker's words."""
    text = f"{tool} was refused earlier in this turn ({code}: {reason}); not asked again"
    return _bounded(text, MAX_NOTICE_CHARS)
