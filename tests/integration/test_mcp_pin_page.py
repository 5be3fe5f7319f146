"""A pin signed on the approval page (12-tool-sources "Pinning" step 3 under `[approvals]
require_passkey`): the real brokerd probing the reference `mcp-server-time` in podman,
the real page, headless Chromium with its virtual authenticator as the owner's passkey.

`bxctl mcp pin time` refuses a link while no passkey is enrolled; after one is, its yes
prints the one-time link.  The page shows the same probe (each tool, the digest) and
its button signs the pin's challenge; brokerd verifies, pins and records the `mcp_pin`
with its `passkey`.  Refused on the way, each recorded as an `approval_attempt` (a
refused passkey leaves the probe held): a bare pin, assertions from the same browser
and passkey over the challenge of another digest or another `invalidates`, and, after
an unpin, the page's kept assertion replayed for the second probe.  The used link
shows nothing any more, and the log verifies."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from boxmaker.proto.mcp import pin_challenge
from boxmaker.proto.wire import b64url
from tests.approvals.browser import Stack, browser_missing
from tests.approvals.test_page_browser import screenshot
from tests.fakes.brokerd import BXCTL, admin, env_for
from tests.fakes.podman import mcp_image
from tests.integration.test_mcp_pin import mcp_home, pin_body, probe

pytestmark = [pytest.mark.browser, pytest.mark.podman,
              pytest.mark.skipif(browser_missing() is not None,
                                 reason=browser_missing() or "")]

PROBE_S = 330


@pytest.fixture
def stack() -> Iterator[Stack]:
    image = mcp_image()
    made = Stack(make_home=lambda extra: mcp_home(image, extra))
    try:
        yield made
    finally:
        made.close()


def bxctl_pin(stack: Stack) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*stack.bxctl_argv(), "mcp", "pin", "time", "--no-qr"], input="y\n",
                          env=stack.bxctl_env(), capture_output=True, text=True,
                          timeout=PROBE_S, check=False)


def browser_sign(stack: Stack, challenge: bytes, allow: list[str]) -> dict[str, Any]:
    """An assertion of the page's passkey over `challenge`, made in the page itself."""
    found: dict[str, Any] = stack.driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "bx.assertion(arguments[0], 'localhost', arguments[1])"
        ".then(done, (e) => done({error: String(e)}));", b64url(challenge), allow)
    assert "error" not in found, found
    return found


def kept_assertion(stack: Stack, sha256: str) -> dict[str, Any]:
    """The assertion brokerd kept beside the log, back in the wire's form."""
    doc = json.loads((stack.home.audit / "assertions" / f"{sha256}.json").read_bytes())
    response = doc["response"]
    return {"credential_id": doc["id"], "authenticator_data": response["authenticatorData"],
            "client_data_json": response["clientDataJSON"], "signature": response["signature"],
            "user_handle": response["userHandle"]}


def test_a_pin_signed_on_the_page_and_the_assertions_it_refuses(stack: Stack) -> None:
    home = stack.home
    unsigned = bxctl_pin(stack)  # no passkey yet: nothing could sign a link
    assert unsigned.returncode == 1, unsigned.stdout + unsigned.stderr
    assert "no passkey is enrolled" in unsigned.stderr
    assert "pinned time" not in unsigned.stdout
    stack.enrol()
    credential = stack.driver.get_credentials()[0].id.rstrip("=")
    run = bxctl_pin(stack)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "+ tool get_current_time  (added)" in run.stdout
    link = next(line.strip() for line in run.stdout.splitlines() if "/pin#" in line)
    assert link.startswith(f"{stack.origin}/pin#")
    token = link.rsplit("#", 1)[1]
    options = admin(home.admin, "mcp_pin_options", {"token": token})["mcp_pin_options"]
    first = options["probe"]
    assert first["server"] == "time" and first["pinned"] is None
    assert f"digest  {first['digest']}" in run.stdout
    assert options["allow_credentials"] == [credential]

    # Without a passkey, still passkey_required (and the probe stays held).
    bare = admin(home.admin, "mcp_pin", pin_body(first))
    assert bare["error"]["code"] == "passkey_required"

    # The page shows the probe as bxctl did.
    stack.driver.get(link)
    stack.wait(lambda d: d.find_element(By.ID, "go").is_displayed())
    shown = stack.text("#probe")
    for tool in first["tools"]:
        assert f"+ tool {tool['name']}  (added)" in shown
    assert f"digest  {first['digest']}" in shown
    assert first["digest"] in stack.text("#digest")
    screenshot(stack, "pin-phone.png")

    # The same passkey, in the same page, over another digest or invalidates: refused.
    for digest, lost in (("00" * 32, []), (first["digest"], [{"grant": "time-all",
                                                               "rule": None}])):
        other = browser_sign(stack, pin_challenge(server="time", probe_id=first["probe_id"],
                                                  digest=digest, invalidates=lost),
                             [credential])
        refused = admin(home.admin, "mcp_pin", pin_body(first, other))
        assert refused["error"]["code"] == "passkey_required", refused
        assert "challenge" in refused["error"]["message"]

    # The page's own button signs this pin: pinned and recorded with the passkey.
    stack.driver.find_element(By.ID, "go").click()
    stack.wait(lambda d: "pinned: time" in d.find_element(By.ID, "status").text, timeout=60)
    assert first["digest"] in stack.text("#status")
    status = admin(home.admin, "mcp_status", {})["mcp_status"]["servers"]
    assert [(s["id"], s["state"], s["pin"]) for s in status] == [
        ("time", "pinned", first["digest"])]
    (pinned,) = home.events("mcp_pin")
    assert pinned["action"] == "pinned" and pinned["digest"] == first["digest"]
    assert pinned["passkey"]["credential_id"] == credential
    assert pinned["by"] == os.getuid()  # the page's uid: it sent the mcp_pin
    signed = kept_assertion(stack, pinned["passkey"]["assertion_sha256"])

    # The link is used up with its probe.
    gone = admin(home.admin, "mcp_pin_options", {"token": token})
    assert gone["error"]["code"] == "no_such_probe"
    stack.driver.refresh()
    stack.wait(lambda d: "cannot be used" in d.find_element(By.ID, "what").text)

    # After an unpin, that assertion does not pin the second probe of the same list.
    assert admin(home.admin, "mcp_unpin", {"server": "time", "reason": None}) == {
        "id": 1, "ok": {}}
    second = probe(home)
    assert second["digest"] == first["digest"] and second["probe_id"] != first["probe_id"]
    replayed = admin(home.admin, "mcp_pin", pin_body(second, signed))
    assert replayed["error"]["code"] == "passkey_required"
    assert "challenge" in replayed["error"]["message"]
    assert [p["action"] for p in home.events("mcp_pin")] == ["pinned", "unpinned"]
    assert len(home.events("approval_attempt")) == 4
    assert stack.brokerd.stop() == 0, stack.brokerd.log()
    verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                            capture_output=True, text=True, env=env_for(home), check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
