"""A chunked body of server-sent events, decoded in one step (06-loopd, issue 23 goal 5).

`ChunkedEvents.feed(raw)` takes the raw bytes of a chunked response body, as
read from the socket, and returns the events they completed: the data of a
plain event (one ``data: `` line, nothing else) as a `str`, any other event
as an `SSEEvent`.  It is exactly `ChunkedDecoder` followed by `SSEParser`
(the general path, which it uses for everything out of the ordinary; a
property test holds the two the same on any input cut anywhere), with a
fast path for the form llama-server writes: one chunk per event, each
``HEX\\r\\ndata: VALUE\\n\\n\\r\\n``.

The fast path, when both stages stand at a boundary (the decoder before a
chunk's size line, the parser between events), cuts the bytes up to the
last ``\\n\\n\\r\\n`` at that separator once: each piece must be ``HEX\\r\\ndata:
VALUE``.  A piece's length fixes its chunk's size (size + digits = length,
one size per length) and so the one canonical size line it must start with,
looked up in a table; `removeprefix` takes it off (a piece without it comes
back as itself), and the values joined must hold no ``\\r`` or ``\\n``.
Then each piece is one whole chunk whose data is one ``data:`` line and a
blank line, which is what the two stages would find, and the values are the
pieces without their prefixes.  Any piece that does not fit,
and whatever follows the last separator, goes the general path, with its
limits.  The stages' state is theirs: after a general step, the rest of an
open chunk is finished by the general path so that the next chunk may take
the fast path again.  Pure: no I/O.
"""

from __future__ import annotations

from itertools import repeat
from operator import is_not, itemgetter
from typing import Final, TypeAlias

from ._chunked import ChunkedDecoder
from ._sse import SSEEvent, SSEParser

Item: TypeAlias = "str | SSEEvent"
"""An event as handed up: a plain data event's data, or the event."""

_SEPARATOR: Final = b"\n\n\r\n"
_MAX_PIECE: Final = 8192
"""Pieces longer than this (events over about 8 KiB) take the general path."""
_MAX_HELD_SIZE_LINE: Final = 32



def _tables() -> tuple[list[bytes], list[str]]:
    """For each piece length, the size line and ``data: `` it starts with.  A length
    no chunk size gives has a prefix longer than any piece, which nothing starts with."""
    never = b"\xff" * (_MAX_PIECE + 1)
    prefixes = [never] * (_MAX_PIECE + 1)
    size = 8  # the smallest chunk: "data: " and "\n\n"
    while True:
        line = b"%x\r\ndata: " % size
        length = size + len(line) - 8  # size line, CRLF, the data without its \n\n
        if length > _MAX_PIECE:
            break
        prefixes[length] = line
        size += 1
    return prefixes, [p.decode("latin-1") for p in prefixes]


_PREFIXES, _TEXT_PREFIXES = _tables()


class ChunkedEvents:
    """`feed` raw chunked body bytes; get the events they completed.

    `done` once the body's last chunk and trailer were read.  `plain` is True
    when no event the last feed returned can be ``[DONE]`` or an error (every
    one a `str` from the fast path and no such text in its bytes): a
    conservative hint.  `fast_events` counts the events the fast path took.
    """

    __slots__ = ("_decoder", "_held", "_parser", "fast_events", "plain")

    def __init__(self, parser: SSEParser | None = None) -> None:
        self._decoder = ChunkedDecoder()
        self._parser = parser if parser is not None else SSEParser()
        self.plain = False
        self.fast_events = 0
        # the start of a chunk after the fast path's last whole one, kept for the
        # next feed when no event can end in it (see _holdable)
        self._held = b""

    @property
    def parser(self) -> SSEParser:
        return self._parser

    @property
    def done(self) -> bool:
        return self._decoder.done

    @property
    def in_body(self) -> bool:
        """Bytes of a chunk are held, or the decoder is inside the body."""
        return bool(self._held) or self._decoder.in_body

    def feed(self, raw: bytes) -> list[Item]:
        """Consume `raw`; return the events it completed, in order (maybe none)."""
        out: list[Item] = []
        self.plain = True
        if self._held:
            raw = self._held + raw
            self._held = b""
        raw = self._to_chunk_start(raw, out)
        if raw and self._parser.at_boundary(allow_start=True):
            taken = self._fast(raw, out)
            if taken:
                raw = raw[taken:]
                if raw and _holdable(raw):
                    self._held = raw
                    return out
        if raw:
            self._general(raw, out)
        return out

    def _to_chunk_start(self, raw: bytes, out: list[Item]) -> bytes:
        """Feed the general path up to the start of the next chunk's size line;
        what is left of `raw` (b"" when the boundary is not in it)."""
        decoder = self._decoder
        for _ in range(3):  # a size line's rest, its data, the data's CRLF
            left = decoder.chunk_left()
            if left == 0 or not raw:
                return raw
            if left is None:  # inside a size line (or the trailer, or after the end)
                eol = raw.find(b"\r\n")
                left = eol + 2 if eol >= 0 and decoder.in_size_line else len(raw)
            self._general(raw[:left], out)
            raw = raw[left:]
        if decoder.chunk_left() != 0:
            self._general(raw, out)
            return b""
        return raw

    def _fast(self, raw: bytes, out: list[Item]) -> int:
        """Take the leading whole plain events of `raw` (the decoder at a chunk's
        start, the parser between events); how many bytes were taken (0: none)."""
        if self._parser.max_event_bytes < _MAX_PIECE:
            return 0
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            return self._fast_bytes(raw, out)
        pieces = text.split("\n\n\r\n")
        rest = len(pieces.pop())
        if not pieces:
            return 0
        try:
            prefixes = itemgetter(*map(len, pieces))(_TEXT_PREFIXES)  # one C call, not one a piece
        except IndexError:  # a piece longer than _MAX_PIECE
            return 0
        if len(pieces) == 1:
            prefixes = (prefixes,)
        # each piece without the size line and "data: " it must start with: a piece
        # that does not start with it comes back as itself (the same object)
        values = list(map(str.removeprefix, pieces, prefixes))
        if not all(map(is_not, values, pieces)):
            return 0
        return self._took(values, len(raw) - rest, out)

    def _fast_bytes(self, raw: bytes, out: list[Item]) -> int:
        """`_fast` for bytes that are not all ASCII: the same checks, on bytes."""
        pieces = raw.split(_SEPARATOR)
        rest = len(pieces.pop())
        if not pieces:
            return 0
        try:
            prefixes = itemgetter(*map(len, pieces))(_PREFIXES)
        except IndexError:
            return 0
        if len(pieces) == 1:
            prefixes = (prefixes,)
        parts = list(map(bytes.removeprefix, pieces, prefixes))
        if not all(map(is_not, parts, pieces)):
            return 0
        values = list(map(bytes.decode, parts, repeat("utf-8"), repeat("replace")))
        return self._took(values, len(raw) - rest, out)

    def _took(self, values: list[str], end: int, out: list[Item]) -> int:
        joined = "".join(values)
        if "\n" in joined or "\r" in joined:  # a value with a line end: not one data line
            return 0
        self._parser.started()
        self.fast_events += len(values)
        # no [DONE] and no error among them when the least and the greatest share
        # their first 8 characters (every value lies between them) and those are
        # not '{"error"' ("[DONE]" is shorter)
        low, high = min(values), max(values)
        if (len(low) < 8 or low[:8] != high[:8] or low.startswith('{"error"')) and (
                "[DONE]" in values or any(map(str.startswith, values, repeat('{"error"')))):
            self.plain = False
        out.extend(values)
        return end

    def _general(self, raw: bytes, out: list[Item]) -> None:
        body = self._decoder.feed(raw)
        if body:
            events = self._parser.feed(body)
            if events:
                items = items_of(events)
                # usually the one event a read's boundary cut: checked here, so
                # that the read's other events need no check either
                if self.plain and not all(map(_is_plain, items)):
                    self.plain = False
                out.extend(items)


def _is_plain(item: Item) -> bool:
    return type(item) is str and item != "[DONE]" and not item.startswith('{"error"')


def _holdable(rest: bytes) -> bool:
    """`rest` (what follows the fast path's last whole chunk) may wait for the next
    feed: it is short, and it holds no line end after its size line, so no event
    ends in it (the general path would hand up nothing for it either)."""
    if len(rest) > _MAX_PIECE:
        return False
    eol = rest.find(b"\r\n")
    if eol < 0:  # a size line's start: short (the decoder's own limit is not reached)
        return len(rest) <= _MAX_HELD_SIZE_LINE
    return rest.find(b"\n", eol + 2) < 0 and rest.find(b"\r", eol + 2) < 0


def items_of(events: list[SSEEvent]) -> list[Item]:
    """Each plain data event as its data, any other as itself."""
    return [event.data if (event.data is not None and event.event is None and event.id is None
                           and event.retry is None and not event.fields) else event
            for event in events]
