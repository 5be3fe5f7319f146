"""brokerd's passkey registry (pure): credentials only from the log, sign counts,
enrolment links; and the RP id / origin rules shared with the page."""

from __future__ import annotations

import attrs
import pytest

from boxmaker._passkey_origin import check_passkey_settings, origin_problem
from boxmaker.brokerd._passkeys import (
    ENROLMENT_SECONDS,
    MAX_ENROLMENTS,
    NoSuchEnrolment,
    PasskeyInvalid,
    PasskeyRegistry,
)
from boxmaker.brokerd._tool_sources import pin_record
from boxmaker.proto._convert import U64, structure
from boxmaker.proto.audit._audit import ApprovalRecord, Record
from boxmaker.proto.audit._audit_passkey import PasskeyRecord, PasskeyUse
from boxmaker.proto.wire._wire_passkey import Assertion, approval_challenge, b64url, from_b64url
from tests.brokerd._mcp_home import pin_for
from tests.fakes.authenticator import SoftAuthenticator
from tests.test_source_files import SOURCE, TOOLS

ORIGIN = "https://box.lan:8443"


def record(seq: int, event: object) -> Record:
    return Record(seq=seq, ts="2026-11-29T07:00:00.000000Z", prev="0" * 64,
                  event=event)  # type: ignore[arg-type]


def registry(now: list[float] | None = None) -> PasskeyRegistry:
    clock = now or [0.0]
    return PasskeyRegistry(rp_id="box.lan", origins=(ORIGIN,), clock=lambda: clock[0])


def enrolled(reg: PasskeyRegistry) -> SoftAuthenticator:
    key = SoftAuthenticator(rp_id="box.lan", origin=ORIGIN)
    link = reg.new_enrolment(action="add", name="phone", credential_id=None,
                             expires_at=lambda s: "2026-11-29T07:10:00.000000Z")
    credential = reg.check_registration(link, key.create(reg.creation_options(link)))
    reg.feed(record(5, PasskeyRecord(action="added", credential_id=credential.credential_id,
                                     name="phone", public_key=b64url(credential.public_key),
                                     by=U64(1))))
    return key


def test_credentials_and_counts_come_from_records() -> None:
    reg = registry()
    key = enrolled(reg)
    assert list(reg.credentials) == [key.id] and reg.credentials[key.id].added_seq == 5
    use = PasskeyUse(credential_id=key.id, sign_count=U64(9), assertion_sha256="0" * 64)
    reg.feed(record(6, ApprovalRecord(call=U64(1), approval_id=U64(2), verdict="approved",
                                      by=U64(1), reason=None, redecision=None, passkey=use)))
    assert reg.credentials[key.id].sign_count == 9
    # a signed pin moves the count too (a restart must not accept an older assertion)
    pinned = PasskeyUse(credential_id=key.id, sign_count=U64(12), assertion_sha256="1" * 64)
    reg.feed(record(6, attrs.evolve(pin_record(pin_for(SOURCE, "git", TOOLS), prev=None, by=1),
                                    passkey=pinned)))
    assert reg.credentials[key.id].sign_count == 12
    reg.feed(record(7, PasskeyRecord(action="added", credential_id="AAAA", name="bad",
                                     public_key="!!", by=U64(1))))
    assert "AAAA" not in reg.credentials  # a key that does not decode is never a credential
    reg.feed(record(8, PasskeyRecord(action="removed", credential_id=key.id, name="phone",
                                     public_key="", by=U64(1))))
    assert reg.credentials == {} and not reg.enrolled


def test_verify_checks_the_challenge_and_moves_the_count() -> None:
    reg = registry()
    key = enrolled(reg)
    challenge = approval_challenge(approval_id=1, call=2, session="s", tool="echo", args={},
                                   expires_at="2026-11-29T07:10:00.000000Z", nonce="ab" * 16)
    signed = structure(key.get(challenge), Assertion)
    verified = reg.verify(signed, challenge)
    assert verified.use.sign_count == key.sign_count == reg.credentials[key.id].sign_count
    with pytest.raises(PasskeyInvalid, match="sign count"):
        reg.verify(signed, challenge)  # the same assertion again
    with pytest.raises(PasskeyInvalid, match="challenge"):
        reg.verify(structure(key.get(challenge), Assertion), b"x" * 32)
    stranger = SoftAuthenticator(rp_id="box.lan", origin=ORIGIN)
    with pytest.raises(PasskeyInvalid, match="not enrolled"):
        reg.verify(structure(stranger.get(challenge), Assertion), challenge)
    bare = PasskeyRegistry(rp_id=None, origins=(), clock=lambda: 0.0)
    with pytest.raises(PasskeyInvalid, match="not set up"):
        bare.verify(signed, challenge)


def test_enrolment_links_are_bounded_used_once_and_expire() -> None:
    now = [0.0]
    reg = registry(now)
    links = [reg.new_enrolment(action="add", name=f"k{i}", credential_id=None,
                               expires_at=lambda s: "2026-11-29T07:10:00.000000Z")
             for i in range(MAX_ENROLMENTS + 2)]
    with pytest.raises(NoSuchEnrolment):
        reg.enrolment(links[0].token)  # the oldest went first
    last = links[-1]
    assert reg.use_enrolment(last.token) is last
    with pytest.raises(NoSuchEnrolment):
        reg.enrolment(last.token)
    now[0] += ENROLMENT_SECONDS
    with pytest.raises(NoSuchEnrolment):
        reg.enrolment(links[-2].token)


def test_b64url_round_trip_and_refusals() -> None:
    for data in (b"", b"\x00", b"\xff\xfe", bytes(range(40))):
        assert from_b64url(b64url(data)) == data
    for bad in ("A", "AB=C", "a+b/", "ab cd"):
        with pytest.raises(ValueError):
            from_b64url(bad)


@pytest.mark.parametrize(("origin", "rp_id", "ok"), [
    ("https://box.lan", "box.lan", True),
    ("https://phone.box.lan:8443", "box.lan", True),
    ("http://localhost:8443", "localhost", True),
    ("http://box.lan", "box.lan", False),
    ("https://evilbox.lan", "box.lan", False),
    ("https://box.lan:99999", "box.lan", False),
    ("https://box.lan/", "box.lan", False),
    ("https://user@box.lan", "box.lan", False),
    ("ftp://box.lan", "box.lan", False),
    ("https://BOX.lan", "box.lan", False),
])
def test_origins(origin: str, rp_id: str, ok: bool) -> None:
    assert (origin_problem(origin, rp_id) is None) is ok


def test_settings_go_together() -> None:
    assert check_passkey_settings(None, [], require=False) is None
    assert "go together" in (check_passkey_settings("box.lan", [], require=False) or "")
    assert "needs rp_id" in (check_passkey_settings(None, [], require=True) or "")
    assert "IP address" in (check_passkey_settings("127.0.0.1", [], require=False) or "")


def test_brokerd_loads_webauthn_only_when_a_passkey_is_checked() -> None:
    """webauthn (and pyOpenSSL, pyasn1) is 7 MB of brokerd's memory: it is imported
    by the first check that needs it, not when brokerd starts (issue 23)."""
    import subprocess
    import sys

    code = ("import sys\nimport boxmaker.brokerd._cli, boxmaker.brokerd._serve\n"
            "import boxmaker.brokerd._startup, boxmaker.brokerd._admin\n"
            "before = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('webauthn', 'OpenSSL', 'pyasn1'))\n"
            "from boxmaker.brokerd._passkeys import PasskeyRegistry\n"
            "registry = PasskeyRegistry(rp_id='box.lan', origins=('https://box.lan:8443',),"
            " clock=lambda: 0.0)\n"
            "registry.creation_options(registry.new_enrolment(action='add', name='k',"
            " credential_id=None, expires_at=lambda s: 'then'))\n"
            "print(before, 'webauthn' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["[]", "True"]
