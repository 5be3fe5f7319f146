"""The typed errors built from answers (pure): a non-200 body, a stream error, a timeout."""

from __future__ import annotations

import pytest

from boxmaker._http._endpoint import Endpoint, ResponseHead
from boxmaker._http._error_answers import (
    MAX_ERROR_BODY,
    content_length,
    error_too_large,
    http_error,
    stream_error,
    timeout_error,
)
from boxmaker._http._errors import Phase
from tests.fakes.sse_client import bare_and_pointed

SERVER = Endpoint.tcp("127.0.0.1", 8080)


def head(status: int, *headers: tuple[bytes, bytes]) -> ResponseHead:
    return ResponseHead(status=status, reason="Service Unavailable", headers=headers)


def test_a_stream_error_object_or_a_wrapped_one_is_described() -> None:
    wrapped = stream_error('{"error": {"code": 500, "message": "boom", "type": "server_error"}}',
                           SERVER)
    assert wrapped.error == {"code": 500, "message": "boom", "type": "server_error"}
    assert wrapped.message == ("the inference server at http://127.0.0.1:8080 reported an error"
                               " during the answer: server_error (500): boom")
    assert bare_and_pointed(wrapped)
    bare = stream_error('{"message": "bare", "type": "t"}')  # an older `error: {...}` line
    assert bare.error == {"message": "bare", "type": "t"}
    assert bare.message.startswith("the inference server reported an error during the answer:"
                                   " t: bare")


def test_stream_error_text_that_is_not_json_is_escaped_and_kept() -> None:
    error = stream_error("\x1b[31mred\nline")
    assert error.error is None and error.text == "\x1b[31mred\nline"
    assert "\x1b" not in error.message and "\n" not in error.message
    assert bare_and_pointed(error)


def test_http_error_reads_the_error_object_else_the_text() -> None:
    body = b'{"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}'
    error = http_error(SERVER, head(503), body)
    assert (error.status, error.error_type, error.text) == (503, "unavailable_error",
                                                           body.decode())
    assert error.message == ("the inference server at http://127.0.0.1:8080 answered 503"
                             " Service Unavailable: unavailable_error (503): Loading model")
    assert bare_and_pointed(error)
    plain = http_error(SERVER, head(500), b"  oops \x07 ")
    assert plain.error is None
    assert plain.message.endswith(": oops \\u{0007}") and bare_and_pointed(plain)
    assert http_error(SERVER, head(500), b"").message.endswith(": no body")


def test_content_length_only_when_all_digits() -> None:
    assert content_length(head(200, (b"content-length", b"12"))) == 12
    assert content_length(head(200, (b"content-length", b"-1"))) is None
    assert content_length(head(200)) is None


def test_an_error_body_too_large_says_how_large_when_known() -> None:
    known = error_too_large(SERVER, head(500), MAX_ERROR_BODY + 1)
    assert f"of {MAX_ERROR_BODY + 1} bytes, more than the {MAX_ERROR_BODY}" in known.message
    unknown = error_too_large(SERVER, head(500), None)
    assert f"larger than the {MAX_ERROR_BODY} bytes read" in unknown.message
    assert unknown.status == 500 and unknown.error is None


@pytest.mark.parametrize(("phase", "what"), [
    ("connect", "to connect"),
    ("first_event", "for the answer to start"),
    ("idle", "between two parts of the answer"),
    ("total", "for the whole request"),
])
def test_each_timeout_names_its_phase(phase: Phase, what: str) -> None:
    error = timeout_error(SERVER, phase, 2.5)
    assert error.phase == phase
    assert error.message == (f"the inference server at http://127.0.0.1:8080 took longer than"
                             f" 2.5 s {what}")
    assert bare_and_pointed(error)
