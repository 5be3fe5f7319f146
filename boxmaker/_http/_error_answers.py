"""The typed errors built from what the server answered (06-loopd).

A non-200 answer's body, an error reported inside a stream, a timeout: each
becomes its `InferenceError` here, server text escaped.  Pure: no I/O, no trio.
"""

from __future__ import annotations

from typing import Any, Final

from ..proto._errors import DecodeError
from ..proto._json import loads_object, loads_value
from ._endpoint import Endpoint, ResponseHead
from ._errors import (
    InferenceHTTPError,
    InferenceStreamError,
    InferenceTimeout,
    Phase,
    describe_error_object,
    shown,
)

MAX_ERROR_BODY: Final = 64 * 1024


def content_length(head: ResponseHead) -> int | None:
    """The head's Content-Length, when it is there and all digits."""
    value = head.header(b"content-length")
    if value is None or not value.isdigit():
        return None
    return int(value)


def http_error(endpoint: Endpoint, head: ResponseHead, body: bytes) -> InferenceHTTPError:
    """The typed error for a non-200 answer with `body`."""
    text = body.decode("utf-8", "replace")
    error: dict[str, Any] | None = None
    try:
        document = loads_object(body)
    except DecodeError:
        document = None
    if document is not None and isinstance(document.get("error"), dict):
        error = document["error"]
        detail = describe_error_object(error)
    elif text.strip():
        detail = shown(text.strip())
    else:
        detail = "no body"
    return InferenceHTTPError(
        f"the inference server at {endpoint} answered {head.status}"
        f" {shown(head.reason, 60)}: {detail}",
        status=head.status,
        error=error,
        text=text,
    )


def error_too_large(endpoint: Endpoint, head: ResponseHead,
                    length: int | None) -> InferenceHTTPError:
    """The error for a non-200 answer whose body is longer than MAX_ERROR_BODY."""
    size = f"of {length} bytes, more than" if length is not None else "larger than"
    return InferenceHTTPError(
        f"the inference server at {endpoint} answered {head.status} with an error body"
        f" {size} the {MAX_ERROR_BODY} bytes read",
        status=head.status,
        error=None,
        text="",
    )


def timeout_error(endpoint: Endpoint, phase: Phase, seconds: float | None) -> InferenceTimeout:
    """The error for the client's `phase` timeout of `seconds` having fired."""
    what = {
        "connect": "to connect",
        "first_event": "for the answer to start",
        "idle": "between two parts of the answer",
        "total": "for the whole request",
    }[phase]
    return InferenceTimeout(
        f"the inference server at {endpoint} took longer than {seconds} s {what}",
        phase=phase,
    )


def stream_error(text: str, endpoint: Endpoint | None = None) -> InferenceStreamError:
    """The typed error for an error reported in a stream (`text`: its JSON)."""
    error: dict[str, Any] | None = None
    try:
        value = loads_value(text)
    except DecodeError:
        value = None
    if isinstance(value, dict):
        inner = value.get("error", value)
        if isinstance(inner, dict):
            error = inner
    detail = describe_error_object(error) if error is not None else shown(text)
    server = f"the inference server at {endpoint}" if endpoint else "the inference server"
    return InferenceStreamError(
        f"{server} reported an error during the answer: {detail}",
        error=error,
        text=text,
    )
