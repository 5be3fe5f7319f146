"""A sans-IO parser for server-sent events (WHATWG HTML, "Parsing an event stream").

Fed byte chunks, it returns every event the chunk completed, in order, at
once; it never holds back a complete event waiting for more input.

Rules (06-loopd):

- Line ends are ``\\r\\n``, ``\\n`` and ``\\r``.  A ``\\r`` at the end of one
  chunk is a line end at once; a ``\\n`` starting the next chunk is then the
  second half of that same ``\\r\\n`` and is skipped.
- A line is decoded as UTF-8 with replacement (WHATWG's "UTF-8 decode"), only
  once it is complete, so a chunk boundary inside a UTF-8 sequence does not
  matter.  A byte order mark at the very start of the stream is dropped.
- A line starting with ``:`` is a comment (llama-server's ping); it is counted
  in `SSEParser.comments` (so a caller can see pings) and otherwise ignored.
- ``name: value`` (one space after the colon stripped) or ``name`` alone (the
  whole line is the name, the value is empty).
- ``data`` lines are joined with ``\\n``.  ``event``, ``id`` (unless it holds a
  NUL) and ``retry`` (only ASCII digits) are kept; every other field (an older
  llama-server's ``error: {...}``) is handed up in `SSEEvent.fields`.
- A blank line ends the event.  An event with no ``data`` line and no other
  kept field is not dispatched (WHATWG drops it too).  An incomplete event at
  the end of the stream is discarded; `SSEParser.close` says whether there
  was one.

Pure: no I/O, no trio.
"""

from __future__ import annotations

from itertools import repeat
from typing import Final, NamedTuple

from ..proto._errors import DecodeError

DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
_BOM: Final = "\ufeff"


class SSEError(DecodeError):
    """The event stream breaks a limit (a line or event larger than allowed)."""


class SSEEvent(NamedTuple):
    """One dispatched event (a named tuple: immutable, and cheap on the hot path).

    `data` is None when the event had no ``data`` line at all (only other
    fields); ``""`` when it had an empty one.  `fields` holds every field other
    than data/event/id/retry, in the order seen, as (name, value).
    """

    data: str | None
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    fields: tuple[tuple[str, str], ...] = ()

    def field(self, name: str) -> str | None:
        """The last value of the extra field `name` (e.g. ``error``), if any."""
        found: str | None = None
        for key, value in self.fields:
            if key == name:
                found = value
        return found


_new_tuple = tuple.__new__
_NONES = repeat(None)
_EMPTIES = repeat(())


class SSEParser:
    """Feed bytes with `feed`; get the completed events back.

    `max_event_bytes` bounds the memory one event (or one unterminated line)
    may take; beyond it `feed` raises SSEError.
    """

    __slots__ = (
        "_at_start",
        "_buffer",
        "_data",
        "_event",
        "_extra",
        "_has_fields",
        "_id",
        "_max",
        "_pending_bytes",
        "_retry",
        "_skip_lf",
        "comments",
        "last_plain",
    )

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._buffer = b""  # an incomplete line, never containing \r or \n
        self._skip_lf = False  # the previous chunk ended with \r
        self._at_start = True  # no line decoded yet: a BOM may still come
        self._pending_bytes = 0  # size of the event being built
        self.comments = 0
        # True when every event the last feed returned is a plain data event that
        # is neither "[DONE]" nor an error object (a conservative hint for callers)
        self.last_plain = False
        self._reset()

    def _reset(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._extra: list[tuple[str, str]] = []
        self._has_fields = False
        self._pending_bytes = 0

    @property
    def max_event_bytes(self) -> int:
        return self._max

    def at_boundary(self, *, allow_start: bool = False) -> bool:
        """Between two events: nothing held, no CR just before, and (unless
        `allow_start`) past the stream's first line, where a BOM may come."""
        return not (self._buffer or self._data or self._has_fields or self._skip_lf
                    or (self._at_start and not allow_start))

    def started(self) -> None:
        """A caller that parsed the first line itself (it starts with ``data: ``):
        no BOM can come any more."""
        self._at_start = False

    @property
    def in_event(self) -> bool:
        """True when a partial line or a partial event is held."""
        return bool(self._buffer) or self._has_fields or bool(self._data)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume `chunk`; return the events it completed (maybe none)."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            self._skip_lf = chunk[-1] == 0x0D
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self._buffer += chunk
            if len(self._buffer) > self._max:
                raise SSEError(f"an event stream line is longer than {self._max} bytes")
            return []
        # every complete line, each with its "\n"; a UTF-8 sequence never spans a "\n"
        complete = self._buffer + chunk[: cut + 1] if self._buffer else chunk[: cut + 1]
        self._buffer = chunk[cut + 1 :]
        if len(self._buffer) > self._max:
            raise SSEError(f"an event stream line is longer than {self._max} bytes")
        text = complete.decode("utf-8", "replace")
        if self._at_start:
            self._at_start = False
            if text.startswith(_BOM):
                text = text[1:]
        return self._blocks(text)

    def _blocks(self, text: str) -> list[SSEEvent]:
        """`text` is whole lines.  Cut it at blank lines: each piece before a
        "\n\n" is the lines of one event (then a blank line); the rest is lines
        of an event still open.  The usual event, one ``data:`` line, takes the
        fast path; anything else goes line by line."""
        self.last_plain = False
        if not self._data and not self._has_fields and text.startswith("data: "):
            # all at once when every complete event is one "data: " line (llama-server's):
            # cut between the events, not at every blank line, and check by counting
            cut = text.rfind("\n\n")
            if cut >= 0 and cut + 2 <= self._max:
                values = text[6:cut].split("\n\ndata: ")
                count = len(values)
                if text.count("\n", 0, cut + 2) == 2 * count:
                    # C-level iteration: no Python bytecode per event
                    events = list(map(_new_tuple, repeat(SSEEvent, count),
                                      zip(values, _NONES, _NONES, _NONES, _EMPTIES,
                                          strict=False)))
                    self.last_plain = (text.find('{"error"', 0, cut) < 0
                                       and text.find("data: [DONE]", 0, cut) < 0)
                    tail = text[cut + 2 :]
                    if tail:
                        self._lines(tail[:-1].split("\n"), events)
                    return events
        blocks = text.split("\n\n")
        tail = blocks.pop()
        events = []
        maximum = self._max
        for block in blocks:
            if (
                block.startswith("data:")
                and "\n" not in block
                and not self._data
                and not self._has_fields
            ):
                if len(block) > maximum:
                    raise SSEError(f"an event is larger than {maximum} bytes")
                value = block[5:]
                if value[:1] == " ":
                    value = value[1:]
                events.append(_new_tuple(SSEEvent, (value, None, None, None, ())))
            else:
                self._lines(block.split("\n"), events)
                if self._data or self._has_fields:
                    events.append(self._dispatch())
        if tail:
            self._lines(tail[:-1].split("\n"), events)
        return events

    def _lines(self, lines: list[str], events: list[SSEEvent]) -> None:
        """Apply `lines` one by one (a blank one dispatches the open event)."""
        data = self._data
        for line in lines:
            if not line:
                if data or self._has_fields:
                    events.append(self._dispatch())
                    data = self._data
                continue
            if line[0] == ":":
                self.comments += 1
                continue
            self._pending_bytes += len(line)
            if self._pending_bytes > self._max:
                raise SSEError(f"an event is larger than {self._max} bytes")
            colon = line.find(":")
            if colon < 0:
                name, value = line, ""
            else:
                name = line[:colon]
                value = line[colon + 1 :]
                if value and value[0] == " ":
                    value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                self._event = value
                self._has_fields = True
            elif name == "id":
                if "\0" not in value:
                    self._id = value
                    self._has_fields = True
            elif name == "retry":
                if value.isascii() and value.isdigit():
                    self._retry = int(value)
                    self._has_fields = True
            else:
                self._extra.append((name, value))
                self._has_fields = True

    def _dispatch(self) -> SSEEvent:
        data = self._data
        event = SSEEvent(
            data=("\n".join(data) if len(data) != 1 else data[0]) if data else None,
            event=self._event,
            id=self._id,
            retry=self._retry,
            fields=tuple(self._extra),
        )
        self._reset()
        return event

    def close(self) -> bool:
        """End of stream.  True when an incomplete event was discarded."""
        partial = self.in_event
        self._buffer = b""
        self._reset()
        return partial
