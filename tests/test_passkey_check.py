"""The kept-assertion re-check and the framing rule (pure; issue 22 items 3 and 4)."""

from __future__ import annotations

import hashlib
import json

import attrs
import pytest

from boxmaker._passkey_check import (
    FramedCeremony,
    LoggedApproval,
    check_not_framed,
    recheck,
    sidecar_bytes,
)
from boxmaker.brokerd._passkeys import assertion_document
from boxmaker.proto._convert import structure
from boxmaker.proto.wire._wire_passkey import Assertion, approval_challenge, b64url
from tests.fakes.authenticator import SoftAuthenticator

ORIGIN = "https://box.lan:8443"
NONCE = "ab" * 16


def _cose(key: SoftAuthenticator) -> bytes:
    return key._cose_key()


def _signed() -> tuple[LoggedApproval, bytes, bytes]:
    key = SoftAuthenticator(rp_id="box.lan", origin=ORIGIN)
    facts = {"approval_id": 7, "call": 3, "session": "s1", "tool": "echo",
             "args": {"text": "hi"}, "expires_at": "2026-12-01T22:00:00.000000Z"}
    challenge = approval_challenge(**facts, nonce=NONCE)  # type: ignore[arg-type]
    document = assertion_document(structure(key.get(challenge), Assertion))
    kept = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    logged = LoggedApproval(seq=9, credential_id=key.id, sign_count=key.sign_count,
                            assertion_sha256=hashlib.sha256(kept).hexdigest(),
                            public_key=_cose(key), **facts)  # type: ignore[arg-type]
    return logged, kept, sidecar_bytes(nonce=NONCE, rp_id="box.lan", origins=(ORIGIN,))


def test_a_kept_assertion_rechecks_and_each_change_is_seen() -> None:
    logged, kept, sidecar = _signed()
    assert recheck(logged, kept, sidecar) is None
    for changed in ({"args": {"text": "other"}}, {"tool": "fetch"}, {"call": 4},
                    {"expires_at": "2026-12-01T23:00:00.000000Z"}, {"session": "s2"}):
        problem = recheck(attrs.evolve(logged, **changed), kept, sidecar)  # type: ignore[arg-type]
        assert problem is not None and "does not verify" in problem, changed
    assert "sign count" in (recheck(attrs.evolve(logged, sign_count=99), kept, sidecar) or "")
    assert "not enrolled" in (recheck(attrs.evolve(logged, public_key=None), kept, sidecar)
                              or "")
    assert "hash" in (recheck(logged, kept + b" ", sidecar) or "")
    other = sidecar_bytes(nonce="cd" * 16, rp_id="box.lan", origins=(ORIGIN,))
    assert "does not verify" in (recheck(logged, kept, other) or "")
    for bad in (b"[]", b'{"nonce":"x","rp_id":"box.lan","origins":[]}',
                sidecar[:-1] + b',"extra":1}', b"x" * 5000):
        assert recheck(logged, kept, bad) is not None


@pytest.mark.parametrize("client", [
    {"crossOrigin": True}, {"crossOrigin": "false"}, {"topOrigin": "https://evil.example"},
    {"crossOrigin": False, "topOrigin": None}])
def test_framed_client_data_is_refused(client: dict[str, object]) -> None:
    data = b64url(json.dumps({"type": "webauthn.get", "origin": ORIGIN} | client).encode())
    with pytest.raises(FramedCeremony):
        check_not_framed(data, (ORIGIN,))


def test_plain_client_data_passes() -> None:
    for client in ({}, {"crossOrigin": False}, {"topOrigin": ORIGIN}):
        check_not_framed(b64url(json.dumps({"type": "webauthn.get"} | client).encode()),
                         (ORIGIN,))
    with pytest.raises(FramedCeremony, match="twice"):
        check_not_framed(b64url(b'{"a":1,"a":2}'), (ORIGIN,))
