"""admin.sock's pin links through the real brokerd, without podman: what refuses a link
before any probe is looked at (passkeys not set up, none enrolled: nothing could ever
sign it), a link or its options for a probe or token that is not held (`no_such_probe`),
and a bare pin still `passkey_required`.  Nothing of it is recorded.  A link made for a
live probe, shown, signed and pinned on the real page is
tests/integration/test_mcp_pin_page.py (podman, Chromium)."""

from __future__ import annotations

from typing import Any

from tests.brokerd.test_mcp_decide import GRANTS, SOURCE
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import Home, admin, start
from tests.integration.test_passkey_brokerd import ORIGIN, PASSKEYS, enrol

LINK = {"server": "time", "probe_id": 77, "digest": "9a1f" * 16, "invalidates": []}
TOKEN = {"token": "5c" * 32}


def _home(approvals_extra: str) -> Home:
    home = Home(grants={"time.toml": GRANTS}, approvals_extra=approvals_extra)
    (home.home / "sources").mkdir()
    (home.home / "sources" / "time.toml").write_text(SOURCE)
    return home


def _code(answer: dict[str, Any]) -> tuple[str, str]:
    return answer["error"]["code"], answer["error"]["message"]


def test_no_link_without_passkeys_set_up() -> None:
    home = _home("")
    proc = start(home)
    try:
        link = admin(home.admin, "mcp_pin_link", LINK)
        options = admin(home.admin, "mcp_pin_options", TOKEN)
    finally:
        assert proc.stop() == 0, proc.log()
        home.cleanup()
    assert _code(link)[0] == "passkey_required" and "rp_id" in _code(link)[1]
    assert _code(options)[0] == "passkey_required"


def test_no_link_without_an_enrolled_passkey_nor_for_a_probe_not_held() -> None:
    home = _home(PASSKEYS + "require_passkey = true\n")
    proc = start(home)
    try:
        before = admin(home.admin, "mcp_pin_link", LINK)
        assert "ok" in enrol(home, SoftAuthenticator(rp_id="localhost", origin=ORIGIN))
        unknown = admin(home.admin, "mcp_pin_link", LINK)
        options = admin(home.admin, "mcp_pin_options", TOKEN)
        bare = admin(home.admin, "mcp_pin", LINK)
        records = {key for r in home.audit_lines() for key in r}
    finally:
        assert proc.stop() == 0, proc.log()
        home.cleanup()
    assert _code(before)[0] == "passkey_required"
    assert "no passkey is enrolled" in _code(before)[1]
    assert _code(unknown)[0] == "no_such_probe"
    assert _code(options)[0] == "no_such_probe" and "bxctl mcp pin" in _code(options)[1]
    assert _code(bare)[0] == "no_such_probe"  # the probe is checked before the passkey
    assert "passkey" in records  # the enrolment: the log is read
    assert "mcp_pin" not in records and "approval_attempt" not in records
