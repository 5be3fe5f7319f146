"""Issue 22 item 5: what a new user sees first, in a real Chromium against the real
page and brokerd: no passkey enrolled yet, the end of the enrolment, a browser
without the passkey, and an approval that went away (answered or expired).
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.approvals.browser import Stack, browser_missing
from tests.approvals.test_page_browser import answer_of, ask

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(browser_missing() is not None,
                                 reason=browser_missing() or "")]


def test_the_first_screen_says_no_passkey_is_enrolled_and_what_to_run(stack: Stack) -> None:
    stack.driver.get(stack.origin + "/")
    stack.wait(lambda d: d.find_element(By.ID, "no-passkey").is_displayed())
    text = stack.text("#no-passkey")
    assert "No passkey is enrolled" in text and "bxctl passkey add --name" in text
    assert not stack.driver.find_element(By.ID, "login-button").is_displayed()


def test_the_enrolment_ends_with_a_link_to_the_approvals(stack: Stack) -> None:
    stack.enrol()
    link = stack.wait(lambda d: d.find_element(By.ID, "to-approvals"))
    assert link.is_displayed()
    link.click()
    stack.wait(lambda d: d.find_element(By.ID, "login-button").is_displayed())
    assert not stack.driver.find_element(By.ID, "no-passkey").is_displayed()


def test_a_browser_without_the_passkey_is_told_so(stack: Stack) -> None:
    stack.enrol()
    for credential in stack.driver.get_credentials():  # another browser: not this passkey
        stack.driver.remove_credential(credential.id)
    stack.driver.get(stack.origin + "/")
    stack.wait(lambda d: d.find_element(By.ID, "login-button").is_displayed())
    stack.driver.find_element(By.ID, "login-button").click()
    stack.wait(lambda d: "login failed" in d.find_element(By.ID, "status").text, timeout=150)
    text = stack.text("#status")
    assert "NotAllowedError" not in text and "The operation either timed out" not in text
    assert "no passkey for this page" in text and "bxctl passkey add" in text


def test_answered_elsewhere_and_expired_say_which() -> None:
    stack = Stack(ttl_ms=8_000)
    try:
        stack.enrol()
        stack.log_in()
        answered_sock, answered = ask(stack, rid=11)
        expiring_sock, expiring = ask(stack, rid=12)
        item = stack.item(answered)
        stack.item(expiring)
        assert stack.bxctl("refuse", str(answered)).returncode == 0
        answer_of(answered_sock)
        stack.wait(lambda d: item.find_element(By.CSS_SELECTOR, ".outcome").text != "")
        assert item.find_element(By.CSS_SELECTOR, ".outcome").text == (
            "answered elsewhere (bxctl or another page)")
        other = stack.item(expiring)
        stack.wait(lambda d: other.find_element(By.CSS_SELECTOR, ".outcome").text != "",
                   timeout=40)
        assert other.find_element(By.CSS_SELECTOR, ".outcome").text == "expired"
        answer_of(expiring_sock)
    finally:
        stack.close()
