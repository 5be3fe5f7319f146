"""A sans-IO decoder of the chunked transfer coding (RFC 9112 section 7.1).

h11 parses the request and the response head; a chunked response body is
decoded here instead, because h11 spends several microseconds on every chunk
(an event object, its state machine) and llama-server sends one chunk per
token: this decoder costs a fraction of that, and returns everything one read
from the socket completed as one piece, at once.

It accepts exactly what h11 accepts (the tests use h11 as the oracle):
``1*20HEXDIG [";" anything] *(SP / HTAB) CRLF``, the data, CRLF; after the
zero chunk, trailer lines up to an empty line (lines ending in LF or CRLF, as
h11 reads header lines).  Pure: no I/O.
"""

from __future__ import annotations

import re
from itertools import repeat
from typing import Final

from ..proto._errors import DecodeError

_CHUNK_HEADER: Final = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\n]*)?[ \t]*")
_HEX: Final = b"0123456789abcdefABCDEF"
_hex: Final = b"%x".__mod__
_TABLE_SIZES: Final = 2048
_size_of: dict[bytes, int] = {}
"""The canonical size line of each length 1.._TABLE_SIZES (lowercase hex, no leading
zero) to that length, filled on first use."""


def _canonical_lengths(sizes: list[bytes]) -> list[int | None]:
    """The length each size line names if it is canonical and at most _TABLE_SIZES."""
    if not _size_of:
        _size_of.update({b"%x" % n: n for n in range(1, _TABLE_SIZES + 1)})
    return list(map(_size_of.get, sizes))
_MAX_LINE: Final = 4096
_MAX_TRAILER_BYTES: Final = 16384

_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class ChunkedError(DecodeError):
    """The body does not follow the chunked transfer coding."""


class ChunkedDecoder:
    """`feed` raw body bytes; get back the payload they completed (maybe b"")."""

    __slots__ = ("_buffer", "_left", "_state", "_trailer_bytes")

    def __init__(self) -> None:
        self._buffer = b""
        self._state = _SIZE
        self._left = 0  # payload bytes still to come in the current chunk
        self._trailer_bytes = 0

    @property
    def done(self) -> bool:
        """The zero chunk and the trailer section were read: the body is complete."""
        return self._state == _DONE

    @property
    def in_body(self) -> bool:
        """Some of the body has been read and it is not complete."""
        return self._state != _DONE

    @property
    def in_size_line(self) -> bool:
        """Before or inside a chunk's size line (not the trailer, not done)."""
        return self._state == _SIZE

    def chunk_left(self) -> int | None:
        """How many more bytes end the open chunk (its data's rest and CRLF): 0 at
        the start of a size line with nothing held, None inside a size line, the
        trailer, or after the end."""
        state = self._state
        if state == _SIZE:
            return None if self._buffer else 0
        if state == _DATA:
            return self._left + 2
        if state == _DATA_END:
            return 2 - len(self._buffer)
        return None

    @staticmethod
    def _whole_chunks(buf: bytes, out: list[bytes]) -> int:
        """The fast path: leading whole chunks with a bare hex size whose data
        holds no CRLF (llama-server's), checked all at once in C-speed steps.

        Cutting at every CRLF gives size, data, size, data, ...; a pair is
        exactly a chunk iff the size (hex) equals the data's length, so when all
        pairs agree this is the same parse as the byte-by-byte one.  When any
        pair disagrees, nothing is taken and the general loop does the work.
        Returns how many bytes were consumed.
        """
        parts = buf.split(b"\r\n")
        pairs = (len(parts) - 1) // 2
        if not pairs:
            return 0
        sizes = parts[0 : 2 * pairs : 2]
        data = parts[1 : 2 * pairs : 2]
        # the usual case: each size is the lowercase hex of its data's length, written
        # without leading zeros (then it is a bare hex size of 1..20 digits by itself),
        # and no data is empty (a 0 size is the last chunk); else the long check
        lengths = list(map(len, data))
        if (_canonical_lengths(sizes) != lengths
                and (b"0" in sizes or sizes != list(map(_hex, lengths)))):
            joined = b"".join(sizes)
            if joined.strip(_HEX) or max(map(len, sizes)) > 20 or min(map(len, sizes)) == 0:
                return 0
            named = list(map(int, sizes, repeat(16, pairs)))
            if 0 in named or named != lengths:
                return 0
        out.extend(data)
        rest = parts[2 * pairs :]
        return len(buf) - sum(map(len, rest)) - 2 * (len(rest) - 1)

    def feed(self, data: bytes) -> bytes:
        buf = self._buffer + data if self._buffer else data
        end = len(buf)
        pos = 0
        out: list[bytes] = []
        state = self._state
        left = self._left
        fast_tries = 2  # at the start, and once a partial chunk from before is complete
        while pos < end:
            if state == _SIZE:
                if fast_tries:
                    fast_tries -= 1
                    pos += self._whole_chunks(buf[pos:] if pos else buf, out)
                    if pos >= end:
                        break
                # extensions, whitespace, the zero chunk, a partial chunk
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > _MAX_LINE:
                        raise ChunkedError("a chunk size line is too long")
                    break
                header = _CHUNK_HEADER.fullmatch(buf, pos, eol)
                if header is None:
                    raise ChunkedError("a chunk size line is not valid")
                left = int(header.group(1), 16)
                pos = eol + 2
                state = _DATA if left else _TRAILER
            elif state == _DATA:
                take = end - pos
                if take >= left:
                    out.append(buf[pos : pos + left])
                    pos += left
                    left = 0
                    state = _DATA_END
                else:
                    out.append(buf[pos:] if pos else buf)
                    left -= take
                    pos = end
                    fast_tries = 0
            elif state == _DATA_END:
                if end - pos < 2:
                    if buf[pos] != 0x0D:
                        raise ChunkedError("a chunk's data is not followed by CRLF")
                    break
                if buf[pos] != 0x0D or buf[pos + 1] != 0x0A:
                    raise ChunkedError("a chunk's data is not followed by CRLF")
                pos += 2
                state = _SIZE
            elif state == _TRAILER:
                # like h11's header parsing: lines end with LF, a CR before it is dropped
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if end - pos > _MAX_LINE:
                        raise ChunkedError("a trailer line is too long")
                    break
                line_end = nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl
                if line_end == pos:
                    pos = nl + 1
                    state = _DONE
                    break  # like h11: what follows the body is not read
                if b":" not in buf[pos:line_end]:
                    raise ChunkedError("a trailer line is not a header field")
                self._trailer_bytes += nl + 1 - pos
                if self._trailer_bytes > _MAX_TRAILER_BYTES:
                    raise ChunkedError("the trailer section is too long")
                pos = nl + 1
            else:
                raise ChunkedError("data after the end of the chunked body")
        self._state = state
        self._left = left
        self._buffer = buf[pos:] if pos < end else b""
        if not out:
            return b""
        return out[0] if len(out) == 1 else b"".join(out)
