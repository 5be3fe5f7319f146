"""The approval page in a real browser: headless Chromium driven by selenium, with
Chromium's virtual authenticator as the owner's passkey (11-approvals-web).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from tests.approvals.browser import Stack, browser_missing
from tests.fakes.brokerd import call_request, connect, frame, read_frames

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(browser_missing() is not None,
                                 reason=browser_missing() or "")]

HOSTILE = ("\u202eevil\u202c \x1b[31mred\x1b[0m <script>alert(1)</script>"
           "<img src=x onerror=alert(2)> " + "A" * 100_000)


def ask(stack: Stack, text: str = "please", rid: int = 11) -> tuple[socket.socket, int]:
    """A call that waits for the owner; its socket (to read the answer) and approval id."""
    sock = connect(stack.home.broker)
    sock.sendall(frame(call_request("s1", "echo", {"text": text}, rid)))
    first = next(read_frames(sock))
    assert "pending" in first, first
    return sock, first["pending"]["approval_id"]


def answer_of(sock: socket.socket) -> dict[str, Any]:
    with sock:
        return next(read_frames(sock))


def approval_record(stack: Stack, approval_id: int) -> dict[str, Any]:
    found = [r["approval"] for r in stack.home.audit_lines()
             if "approval" in r and r["approval"]["approval_id"] == approval_id]
    assert len(found) == 1, found
    return found[0]


def screenshot(stack: Stack, name: str) -> None:
    target = os.environ.get("BOXMAKER_SCREENSHOTS")
    if target:
        stack.driver.save_screenshot(str(Path(target) / name))


def test_enrol_log_in_approve_with_the_passkey_and_refuse(stack: Stack) -> None:
    stack.enrol()
    credential = stack.driver.get_credentials()[0]
    stack.log_in()
    sock, approval_id = ask(stack)
    item = stack.item(approval_id)  # appears without a reload
    assert "echo" in item.find_element(By.CSS_SELECTOR, ".tool").text
    assert "please" in item.find_element(By.CSS_SELECTOR, ".args").text
    assert "expires in" in item.find_element(By.CSS_SELECTOR, ".countdown").text
    other_sock, other = ask(stack, text="\u202etxt.exe\u202c \x1b[2J<b>hi</b>\nline 2", rid=13)
    stack.item(other)
    screenshot(stack, "approvals-phone.png")
    stack.driver.set_window_size(1280, 900)
    screenshot(stack, "approvals-desktop.png")
    assert stack.bxctl("refuse", str(other)).returncode == 0
    answer_of(other_sock)
    item.find_element(By.CSS_SELECTOR, "button.approve").click()
    stack.wait(lambda d: item.find_element(By.CSS_SELECTOR, ".outcome").text == "approved")
    assert answer_of(sock)["result"]["status"] == "ok"
    record = approval_record(stack, approval_id)
    assert record["verdict"] == "approved"
    assert record["passkey"]["credential_id"] == credential.id.rstrip("=")
    # Refuse, with a reason.
    sock, approval_id = ask(stack, rid=12)
    item = stack.item(approval_id)
    item.find_element(By.CSS_SELECTOR, "input.reason").send_keys("not now")
    item.find_element(By.CSS_SELECTOR, "button.refuse").click()
    stack.wait(lambda d: item.find_element(By.CSS_SELECTOR, ".outcome").text == "refused")
    denied = answer_of(sock)["denied"]
    assert denied["code"] == "refused" and "not now" in denied["reason"]
    assert approval_record(stack, approval_id)["reason"] == "not now"


def test_replayed_and_misdirected_assertions_are_refused(stack: Stack) -> None:
    stack.enrol()
    stack.log_in()
    first_sock, first = ask(stack, rid=11)
    second_sock, second = ask(stack, rid=12)
    stack.item(first)
    stack.item(second)
    # The page's own code makes an assertion for the first approval...
    script = """
      const [id, other, done] = arguments;
      (async () => {
        const pending = await (await fetch("/api/pending")).json();
        const item = pending.items.find((i) => i.approval_id === id);
        const assertion = await bx.assertion(item.challenge, null, [pending.credential]);
        const results = [];
        for (const target of [other, id, id]) {
          try { await bx.post("/api/approve", {approval_id: target, assertion});
                results.push("ok"); }
          catch (e) { results.push(e.code); }
        }
        done(results);
      })();
    """
    results = stack.driver.execute_async_script(script, first, second)
    # ...which does not approve the second, approves the first once, then is spent.
    assert results == ["passkey_required", "ok", "no_such_approval"]
    assert answer_of(first_sock)["result"]["status"] == "ok"
    attempts = stack.home.events("approval_attempt")
    assert [a["approval_id"] for a in attempts] == [second]
    stack.bxctl("refuse", str(second))
    assert answer_of(second_sock)["denied"]["code"] == "refused"


def test_answered_from_bxctl_while_the_page_shows_it(stack: Stack) -> None:
    stack.enrol()
    stack.log_in()
    sock, approval_id = ask(stack)
    item = stack.item(approval_id)
    bare = stack.bxctl("approve", str(approval_id))
    assert bare.returncode == 1 and "passkey" in bare.stderr
    assert stack.bxctl("refuse", str(approval_id), "--reason", "from the terminal").returncode == 0
    stack.wait(lambda d: "answered elsewhere" in item.find_element(By.CSS_SELECTOR,
                                                                   ".outcome").text)
    assert not item.find_element(By.CSS_SELECTOR, "button.approve").is_enabled()
    assert answer_of(sock)["denied"]["code"] == "refused"


def test_hostile_arguments_are_shown_escaped_and_inert(stack: Stack) -> None:
    stack.enrol()
    stack.log_in()
    sock, approval_id = ask(stack, text=HOSTILE)
    item = stack.item(approval_id)
    shown = item.find_element(By.CSS_SELECTOR, ".args").get_attribute("textContent")
    assert "\\u{202E}evil\\u{202C}" in shown
    assert "\\u{001B}[31mred" in shown and "\x1b" not in shown and "\u202e" not in shown
    assert "<script>alert(1)</script>" in shown  # as text
    assert shown.count("A") >= 100_000  # in full, never cut
    assert item.find_elements(By.CSS_SELECTOR, "img, script") == []
    with pytest.raises(NoAlertPresentException):
        stack.driver.switch_to.alert.text  # noqa: B018
    assert stack.bxctl("refuse", str(approval_id)).returncode == 0
    answer_of(sock)


def test_a_run_command_approval_shows_argv_cwd_mounts_and_no_network(stack: Stack) -> None:
    stack.enrol()
    stack.log_in()
    sock = connect(stack.home.broker)
    with sock:
        argv = ["git", "log", "a b; rm -rf ~", "\u202e<b>x</b>"]
        sock.sendall(frame(call_request("s1", "run_command",
                                        {"argv": argv, "cwd": "/home/me/src"}, 21)))
        first = next(read_frames(sock))
        approval_id = first["pending"]["approval_id"]
        item = stack.item(approval_id)
        shown = item.find_element(By.CSS_SELECTOR, ".args").get_attribute("textContent")
        # each mount of the ask grant, read from the grant files in brokerd's home (issue 25)
        assert shown.splitlines() == [
            'argv[0]  "git"', 'argv[1]  "log"', 'argv[2]  "a b; rm -rf ~"',
            'argv[3]  "\\u{202E}<b>x</b>"', "cwd      /home/me/src",
            "mount    /home/me/src (ro)",
            "network  none"]
        assert item.find_elements(By.CSS_SELECTOR, "b") == []
        assert stack.bxctl("refuse", str(approval_id)).returncode == 0
        assert next(read_frames(sock))["denied"]["code"] == "refused"


def test_an_expired_approval_says_so() -> None:
    stack = Stack(ttl_ms=4000)
    try:
        stack.enrol()
        stack.log_in()
        sock, approval_id = ask(stack)
        item = stack.item(approval_id)
        stack.wait(lambda d: item.find_element(
            By.CSS_SELECTOR, ".outcome").text == "expired", timeout=30)
        assert not item.find_element(By.CSS_SELECTOR, "button.approve").is_enabled()
        assert answer_of(sock)["denied"]["code"] == "expired"
        assert approval_record(stack, approval_id)["verdict"] == "expired"
    finally:
        stack.close()


def test_security_headers_and_a_cross_origin_post(stack: Stack) -> None:
    stack.driver.get(stack.origin + "/")
    script = """
      const done = arguments[0];
      (async () => {
        const page = await fetch("/");
        const post = await fetch("/api/refuse", {method: "POST", headers: {
          "Content-Type": "application/json"}, body: JSON.stringify({approval_id: 1})});
        done({csp: page.headers.get("content-security-policy"),
              nosniff: page.headers.get("x-content-type-options"),
              post: post.status, cookie: document.cookie});
      })();
    """
    found = stack.driver.execute_async_script(script)
    assert found["csp"] == ("default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                            "form-action 'self'")
    assert found["nosniff"] == "nosniff"
    assert found["post"] == 403  # no CSRF token
    assert found["cookie"] == ""  # HttpOnly
