"""Issue 22 item 3: an assertion made in a cross-origin frame is refused, against
the real brokerd over admin.sock (approve, the page's login, an enrolment).

The `webauthn` package (3.0) reads `crossOrigin` and never checks it, nor
`topOrigin`: a page of someone else's that framed the approval page (framing
is forbidden by the page's headers; this is the defence behind that) got an
assertion brokerd accepted.  Each spelling below was accepted before the fix.
"""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto.wire._wire_passkey import b64url
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import admin, read_frames
from tests.integration.test_passkey_brokerd import ORIGIN, approve, enrol, make_home, pending

__all__ = ["make_home"]

FOREIGN = "https://evil.example"
FRAMED: list[tuple[dict[str, Any] | None, str | None]] = [
    ({"crossOrigin": True, "topOrigin": FOREIGN}, None),
    ({"crossOrigin": True}, None),
    ({"crossOrigin": True, "topOrigin": ORIGIN}, None),
    ({"crossOrigin": "true"}, None),
    ({"crossOrigin": 1}, None),
    ({"crossOrigin": "false"}, None),
    ({"crossOrigin": None, "topOrigin": FOREIGN}, None),
    ({"crossOrigin": False, "topOrigin": FOREIGN}, None),
    ({"crossOrigin": False, "topOrigin": ORIGIN + "/"}, None),
    ({"crossOrigin": False, "topOrigin": 7}, None),
    (None, '{"type":"webauthn.get","challenge":"{challenge}","origin":"{origin}",'
           '"crossOrigin":true,"topOrigin":"https://evil.example","crossOrigin":false}'),
    (None, '{"type":"webauthn.get","challenge":"{challenge}","origin":"{origin}",'
           '"topOrigin":"https://evil.example","topOrigin":"{origin}"}'),
]
IDS = ["foreign-top", "cross-no-top", "cross-own-top", "string-true", "one", "string-false",
       "null-foreign-top", "false-foreign-top", "top-with-slash", "top-not-text",
       "duplicate-cross", "duplicate-top"]


@pytest.mark.parametrize(("extra", "raw"), FRAMED, ids=IDS)
def test_a_framed_assertion_does_not_approve(make_home: Any, extra: dict[str, Any] | None,
                                             raw: str | None) -> None:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    assert enrol(home, key) == {"id": 1, "ok": {}}
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    framed = key.get(shown["challenge"], client_extra=extra, client_raw=raw)
    answer = approve(home, waiting["approval_id"], framed)
    assert answer["error"]["code"] == "passkey_required", answer
    message = answer["error"]["message"]
    assert "frame" in message or "topOrigin" in message or "given twice" in message, message
    assert home.events("approval") == []
    # The owner's own assertion, made on the page itself, still approves it.
    assert approve(home, waiting["approval_id"], key.get(shown["challenge"]))["ok"] == {}
    assert next(read_frames(sock))["result"]["status"] == "ok"
    sock.close()
    assert proc.stop() == 0


def test_own_top_origin_without_cross_origin_approves(make_home: Any) -> None:
    # What a browser may send on the page itself: topOrigin is the page.
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    same = key.get(shown["challenge"], client_extra={"topOrigin": ORIGIN})
    assert approve(home, waiting["approval_id"], same)["ok"] == {}
    sock.close()
    assert proc.stop() == 0


def test_a_framed_login_and_a_framed_enrolment_are_refused(make_home: Any) -> None:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    framing = {"crossOrigin": True, "topOrigin": FOREIGN}
    # The first enrolment needs no assertion, but its attestation is a
    # ceremony too: made in a frame, it is not enrolled.
    link = admin(home.admin, "passkey_enrol", {"action": "add", "name": "phone",
                                                "credential_id": None})["enrolment"]
    options = admin(home.admin, "passkey_options", {"token": link["token"]})["passkey_options"]
    added = admin(home.admin, "passkey_add", {
        "token": link["token"], "credential": key.create(options["creation"],
                                                         client_extra=framing),
        "assertion": None})
    assert added["error"]["code"] == "passkey_required", added
    assert home.events("passkey") == []
    assert enrol(home, key) == {"id": 1, "ok": {}}
    login = admin(home.admin, "passkey_verify", {
        "challenge": b64url(b"L" * 32),
        "assertion": key.get(b"L" * 32, client_extra=framing)})
    assert "error" in login, login
    assert "passkey_verified" in admin(home.admin, "passkey_verify", {
        "challenge": b64url(b"M" * 32), "assertion": key.get(b"M" * 32)})
    assert proc.stop() == 0
