"""Passkey messages and challenges (boxmaker/proto/wire/_wire_passkey.py).

A challenge is SHA-256 of canonical JSON: checked against hashlib over a
document serialised independently (json.dumps, sorted, compact, ASCII), and
every field of what is approved must change it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto._convert import InvalidValue
from boxmaker.proto.wire._wire_passkey import (
    B64URL_MAX,
    Assertion,
    approval_challenge,
    b64url,
    challenge_of,
    declassify_challenge,
    enrolment_challenge,
    from_b64url,
)

APPROVAL: dict[str, Any] = {"approval_id": 4, "call": 17, "session": "s-1", "tool": "read_file",
                            "args": {"path": "/srv/\u00e9"}, "expires_at":
                            "2026-12-01T10:00:00.000000Z", "nonce": "n" * 43}


def _oracle(document: dict[str, Any]) -> bytes:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).digest()


def test_the_approval_challenge_is_sha256_of_the_canonical_document() -> None:
    assert approval_challenge(**APPROVAL) == _oracle(APPROVAL)


@pytest.mark.parametrize(("field", "other"), [
    ("approval_id", 5), ("call", 18), ("session", "s-2"), ("tool", "list_dir"),
    ("args", {"path": "/srv/e"}), ("expires_at", "2026-12-01T10:00:00.000001Z"),
    ("nonce", "m" * 43),
])
def test_every_field_of_an_approval_changes_its_challenge(field: str, other: Any) -> None:
    assert approval_challenge(**dict(APPROVAL, **{field: other})) != approval_challenge(**APPROVAL)


def test_declassify_challenge_binds_the_request_and_the_seq() -> None:
    base = {"session": "s-1", "label": "public", "untrusted": False, "reason": "done", "seq": 9}
    challenge = declassify_challenge(**base)  # type: ignore[arg-type]
    assert challenge == _oracle({"declassify": {k: v for k, v in base.items() if k != "seq"},
                                 "seq": 9})
    for field, other in [("session", "s-2"), ("label", "private"), ("untrusted", True),
                         ("reason", "x"), ("seq", 10)]:
        assert declassify_challenge(**dict(base, **{field: other})) != challenge  # type: ignore[arg-type]


def test_enrolment_challenge() -> None:
    base = {"action": "add", "token": "ab" * 32, "name": "phone", "credential_id": None}
    challenge = enrolment_challenge(**base)  # type: ignore[arg-type]
    assert challenge == _oracle({"passkey": base})
    assert enrolment_challenge(**dict(base, action="remove")) != challenge  # type: ignore[arg-type]
    assert enrolment_challenge(**dict(base, credential_id="AAAA")) != challenge  # type: ignore[arg-type]


def test_the_kinds_of_challenge_cannot_be_confused() -> None:
    # An approval document and a declassify document never hash alike: they differ in keys.
    assert challenge_of({"declassify": {}, "seq": 1}) != challenge_of({"seq": 1})


@given(data=st.binary(max_size=200))
def test_b64url_round_trips_without_padding(data: bytes) -> None:
    text = b64url(data)
    assert "=" not in text and "+" not in text and "/" not in text
    assert from_b64url(text) == data
    assert text == base64.urlsafe_b64encode(data).decode().rstrip("=")


@pytest.mark.parametrize("text", ["A", "AAAAA", "AA==", "a+b/", "a b", "\u00e9\u00e9"])
def test_from_b64url_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        from_b64url(text)


def _assertion(**over: Any) -> Assertion:
    fields = dict(credential_id="Y3JlZA", authenticator_data="YXV0aA",
                  client_data_json="e30", signature="c2ln", user_handle=None)
    fields.update(over)
    return Assertion(**fields)


def test_assertion_fields_must_be_base64url() -> None:
    assert _assertion().user_handle is None
    assert _assertion(user_handle="dXNlcg").user_handle == "dXNlcg"
    for field in ("credential_id", "authenticator_data", "client_data_json", "signature",
                  "user_handle"):
        with pytest.raises(InvalidValue, match=field):
            _assertion(**{field: "not/base64url="})
    with pytest.raises(InvalidValue):
        _assertion(signature="A" * (B64URL_MAX + 1))
    assert len(_assertion(signature="A" * B64URL_MAX).signature) == B64URL_MAX

