"""Exceptions of the pure protocol layer, split by who is at fault.

`DecodeError` is always the *peer's* fault (or the fault of a file someone
else wrote): bytes or values that do not decode under the strict rules of
02-wire.  Our own mistakes surface as ordinary Python errors (TypeError,
AssertionError) and must never be turned into a DecodeError.
"""

from __future__ import annotations

from typing import ClassVar

from .._errors import ErrorCode, PeerError


class ProtoError(PeerError):
    """Base class of every protocol-layer error."""


class DecodeError(ProtoError):
    """Input that does not decode strictly: bad JSON, bad schema, bad frame.

    The message never quotes the input unescaped; `path` names where in the
    document the problem sits (``$.call.args``), when known.
    """

    wire_code: ClassVar[ErrorCode | None] = "bad_frame"
    runbook = "docs/runbook.md#bad-frame"

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class FrameError(DecodeError):
    """A frame whose header or length is wrong (before any JSON is parsed)."""
