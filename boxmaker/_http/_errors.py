"""The errors of the inference client, split by fault (06-loopd), and how server text is shown.

`InferenceUnavailable` (the environment: no connection, a timeout, the server
went away), `InferenceHTTPError` (the server refused the request: a non-200
status), `InferenceStreamError` (the server reported an error in the stream),
`InferenceProtocolError` (the server sent something that is not HTTP/SSE/JSON
as expected).  Their messages escape all server text and carry no runbook
pointer: `message` is the bare text (what loopd's ``inference_unavailable``
answer carries, its pointer in the answer's runbook field), and the places that
show one add the pointer of the error table (``boxmaker._error_table``), as
``str()`` of the error does.  Pure: no I/O, no trio.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from .._error_table import shown as with_pointer
from .._errors import UnavailableError
from ..proto._escape import escape_line

_SHOWN_TEXT: Final = 300

Phase = Literal["connect", "first_event", "idle", "total"]


class InferenceError(UnavailableError):
    """Base class: talking to the inference server failed."""

    wire_code = "inference_unavailable"
    runbook = "docs/runbook.md#inference-unavailable"

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        """The message as shown (a traceback, a log line): with the table's pointer."""
        return with_pointer(self.message, self, joiner=" ")

    def answer_message(self) -> str:
        """A wire answer carries the pointer in its own field: the message alone."""
        return self.message


class InferenceUnavailable(InferenceError):
    """No connection, a timeout, or the server went away (the environment)."""


class InferenceTimeout(InferenceUnavailable):
    """One of the client's timeouts fired; `phase` says which."""

    def __init__(self, message: str, *, phase: Phase) -> None:
        self.phase = phase
        super().__init__(message)


class InferenceClosed(InferenceUnavailable):
    """The server closed the connection early, or a stream ended without [DONE]."""


class InferenceHTTPError(InferenceError):
    """A non-200 answer.  `error` is the body's ``error`` object when it had one."""

    def __init__(
        self, message: str, *, status: int, error: dict[str, Any] | None, text: str
    ) -> None:
        self.status = status
        self.error = error
        self.text = text
        super().__init__(message)

    @property
    def error_type(self) -> str | None:
        value = self.error.get("type") if self.error else None
        return value if isinstance(value, str) else None


class InferenceStreamError(InferenceError):
    """The server reported an error inside the stream (``data: {"error": ...}``
    or an older ``error: ...`` line)."""

    def __init__(self, message: str, *, error: dict[str, Any] | None, text: str) -> None:
        self.error = error
        self.text = text
        super().__init__(message)


class InferenceProtocolError(InferenceError):
    """The server's bytes are not the HTTP, SSE or JSON expected."""


class BodyTooLarge(InferenceProtocolError):
    """A body longer than the reader's limit."""


def shown(text: str, limit: int = _SHOWN_TEXT) -> str:
    """Server text made safe for a terminal or a log line: escaped, truncated."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return escape_line(text)


def describe_error_object(error: dict[str, Any]) -> str:
    """``type (code): message`` of an OpenAI-style error object, escaped."""
    parts: list[str] = []
    kind = error.get("type")
    code = error.get("code")
    message = error.get("message")
    if isinstance(kind, str):
        parts.append(shown(kind, 80))
    if isinstance(code, (int, str)) and not isinstance(code, bool):
        parts.append(f"({shown(str(code), 40)})")
    head = " ".join(parts)
    if isinstance(message, str):
        return f"{head}: {shown(message)}" if head else shown(message)
    return head or "an error object without a message"

