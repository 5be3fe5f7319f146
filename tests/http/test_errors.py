"""boxmaker/_http/_errors.py: the inference client's errors and how server text is shown."""

from __future__ import annotations

from boxmaker._error_table import pointer_of
from boxmaker._errors import UnavailableError
from boxmaker._http._errors import (
    BodyTooLarge,
    InferenceClosed,
    InferenceError,
    InferenceHTTPError,
    InferenceProtocolError,
    InferenceStreamError,
    InferenceTimeout,
    InferenceUnavailable,
    describe_error_object,
    shown,
)


def test_server_text_is_escaped_and_truncated() -> None:
    assert shown("plain") == "plain"
    assert "\x1b" not in shown("red\x1b[31m") and "\n" not in shown("two\nlines")
    long = shown("x" * 1000)
    assert long == "x" * 300 + "..."
    assert shown("abcdef", 3) == "abc..."


def test_an_error_object_is_described_as_type_code_message() -> None:
    error = {"type": "invalid_request_error", "code": 400, "message": "bad"}
    assert describe_error_object(error) == "invalid_request_error (400): bad"
    assert describe_error_object({"message": "only"}) == "only"
    assert describe_error_object({"type": "t"}) == "t"
    assert describe_error_object({"code": "c"}) == "(c)"
    assert describe_error_object({}) == "an error object without a message"


def test_an_error_object_of_the_wrong_types_shows_no_part_of_them() -> None:
    error = {"type": 7, "code": True, "message": ["x"]}
    assert describe_error_object(error) == "an error object without a message"


def test_an_error_object_is_escaped_and_bounded() -> None:
    error = {"type": "t" * 200, "code": "\x1b[2J", "message": "m\x07"}
    described = describe_error_object(error)
    assert "\x1b" not in described and "\x07" not in described
    assert described.startswith("t" * 80 + "... (")


def test_str_adds_the_tables_pointer_and_message_stays_bare() -> None:
    error = InferenceClosed("the server went away")
    assert error.message == "the server went away"
    assert str(error) == f"the server went away {pointer_of(error)}"
    assert pointer_of(error).startswith("docs/runbook.md#")


def test_the_errors_carry_their_details_and_fault() -> None:
    timeout = InferenceTimeout("slow", phase="idle")
    assert timeout.phase == "idle" and isinstance(timeout, InferenceUnavailable)
    http = InferenceHTTPError("refused", status=503, error={"type": "unavailable_error"},
                              text="{}")
    assert (http.status, http.error_type, http.text) == (503, "unavailable_error", "{}")
    assert InferenceHTTPError("x", status=500, error=None, text="").error_type is None
    assert InferenceHTTPError("x", status=500, error={"type": 1}, text="").error_type is None
    stream = InferenceStreamError("boom", error={"message": "m"}, text="t")
    assert (stream.error, stream.text) == ({"message": "m"}, "t")
    assert issubclass(BodyTooLarge, InferenceProtocolError)
    for cls in (InferenceUnavailable, InferenceHTTPError, InferenceStreamError,
                InferenceProtocolError):
        assert issubclass(cls, InferenceError) and issubclass(cls, UnavailableError)
