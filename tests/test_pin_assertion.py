"""boxmaker/_pin_assertion.py: a pin's kept assertion re-verified, with a software
authenticator's real signatures: it verifies over the challenge recomputed from the
record and the sidecar; an edited assertion, a sidecar of another pin (server or
digest), another probe id or `invalidates`, another RP id, a key not enrolled, a
sign count not the record's or going backwards each fail with what was expected and
what was found; a sidecar that is not its form is refused."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import pytest

from boxmaker._pin_assertion import LoggedPin, parse_pin_sidecar, pin_sidecar_bytes, recheck_pin
from boxmaker.brokerd._passkeys import assertion_document
from boxmaker.proto.mcp import pin_challenge
from boxmaker.proto.wire import Assertion, b64url
from tests.fakes.authenticator import SoftAuthenticator

ORIGIN = "http://localhost:8443"
DIGEST = "ab" * 32
LOST = [{"grant": "log-open", "rule": "G13"}, {"grant": "gone", "rule": None}]


def _signed(key: SoftAuthenticator, *, probe_id: int = 7,
            invalidates: list[dict[str, Any]] | None = None) -> bytes:
    signed = key.get(pin_challenge(server="git", probe_id=probe_id, digest=DIGEST,
                                   invalidates=LOST if invalidates is None else invalidates))
    document = assertion_document(Assertion(**signed))
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode("ascii")


def _sidecar(**change: Any) -> bytes:
    fields: dict[str, Any] = {"server": "git", "digest": DIGEST, "probe_id": 7,
                              "invalidates": LOST, "rp_id": "localhost",
                              "origins": [ORIGIN]} | change
    return pin_sidecar_bytes(**fields)


def _logged(key: SoftAuthenticator, kept: bytes, **change: Any) -> LoggedPin:
    return attrs.evolve(LoggedPin(
        seq=9, server="git", digest=DIGEST, credential_id=key.id, sign_count=key.sign_count,
        assertion_sha256=hashlib.sha256(kept).hexdigest(), public_key=key._cose_key(),
        previous_count=None), **change)


@pytest.fixture
def key() -> SoftAuthenticator:
    return SoftAuthenticator(rp_id="localhost", origin=ORIGIN)


def test_a_real_signed_pin_verifies(key: SoftAuthenticator) -> None:
    kept = _signed(key)
    assert recheck_pin(_logged(key, kept), kept, _sidecar()) is None
    assert recheck_pin(_logged(key, kept, previous_count=0), kept, _sidecar()) is None
    side = parse_pin_sidecar(_sidecar())
    assert (side.probe_id, side.invalidates, side.origins) == (7, LOST, (ORIGIN,))


def test_an_edited_assertion_is_seen(key: SoftAuthenticator) -> None:
    kept = _signed(key)
    logged = _logged(key, kept)
    edited = kept.replace(b'"type":"public-key"', b'"type":"public-key" ')
    problem = recheck_pin(logged, edited, _sidecar())
    assert problem == (f"the kept assertion's sha256 is {hashlib.sha256(edited).hexdigest()}, "
                       f"the record's assertion_sha256 {logged.assertion_sha256}")


def test_a_sidecar_of_another_pin_probe_or_invalidates_is_seen(key: SoftAuthenticator) -> None:
    kept = _signed(key)
    logged = _logged(key, kept)
    problem = recheck_pin(logged, kept, _sidecar(digest="cd" * 32))
    assert problem == (f"the challenge sidecar is for server git digest {'cd' * 32}, the "
                       f"record pins server git digest {DIGEST}")
    assert "is for server time" in (recheck_pin(logged, kept, _sidecar(server="time")) or "")
    expected = pin_challenge(server="git", probe_id=7, digest=DIGEST, invalidates=LOST)
    for other in (_sidecar(probe_id=8), _sidecar(invalidates=LOST[:1])):
        problem = recheck_pin(logged, kept, other) or ""
        assert problem.startswith("the assertion signed the challenge "), problem
        side = parse_pin_sidecar(other)
        recomputed = pin_challenge(server="git", probe_id=side.probe_id, digest=DIGEST,
                                   invalidates=side.invalidates)
        assert f"the challenge {b64url(expected)}," in problem
        assert problem.endswith(f" is {b64url(recomputed)}")
    problem = recheck_pin(logged, kept, _sidecar(rp_id="evil.example",
                                                 origins=["https://evil.example"]))
    assert problem is not None and "does not verify for this pin" in problem


def test_the_key_and_the_sign_count_are_checked(key: SoftAuthenticator) -> None:
    kept = _signed(key)
    other = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    assert "does not verify" in (recheck_pin(_logged(key, kept, public_key=other._cose_key()),
                                             kept, _sidecar()) or "")
    assert "was not enrolled" in (recheck_pin(_logged(key, kept, public_key=None), kept,
                                              _sidecar()) or "")
    assert recheck_pin(_logged(key, kept, sign_count=5), kept, _sidecar()) == (
        "the kept assertion's sign count is 1, the record's 5")
    assert recheck_pin(_logged(key, kept, previous_count=3), kept, _sidecar()) == (
        "the sign count went backwards: expected more than 3 (the credential's previous use "
        "in the log), found 1")
    still = SoftAuthenticator(rp_id="localhost", origin=ORIGIN, counter=False)
    kept = _signed(still)
    assert recheck_pin(_logged(still, kept, previous_count=0), kept, _sidecar()) is None


@pytest.mark.parametrize("data", [
    b"[]", b'{"server":"git"}',
    _sidecar()[:-1] + b',"probe_id":8}',  # a key twice
    _sidecar().replace(b'"probe_id":7', b'"probe_id":-1'),
    _sidecar().replace(b'"probe_id":7', b'"probe_id":7.0'),
    _sidecar().replace(DIGEST.encode(), b"AB" * 32),
    _sidecar().replace(b'"rule":"G13"', b'"rule":13'),
    _sidecar(origins=["https://evil.example"]),
    b" " * (256 * 1024 + 1),
])
def test_a_sidecar_not_of_its_form_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_pin_sidecar(data)
