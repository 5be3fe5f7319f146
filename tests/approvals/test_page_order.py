"""Issue 22 item 2: the pending list is newest first, live and after a reload, in
a real Chromium against the real page and brokerd.

`app.js` put each item of the server's newest-first list at the top, which
turned a reload's list (and any poll bringing more than one) oldest first.
"""

from __future__ import annotations

import socket

import pytest
from selenium.webdriver.common.by import By

from tests.approvals.browser import Stack, browser_missing
from tests.approvals.test_page_browser import ask

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(browser_missing() is not None,
                                 reason=browser_missing() or "")]


def shown_ids(stack: Stack) -> list[int]:
    # approval ids are random: newest first is the order they were asked in, reversed
    return [int(node.get_attribute("data-approval-id"))
            for node in stack.driver.find_elements(By.CSS_SELECTOR, "li.approval")]


def test_newest_first_after_a_reload_and_live(stack: Stack) -> None:
    stack.enrol()
    socks: list[socket.socket] = []
    ids: list[int] = []
    for rid in (11, 12, 13):  # waiting before the page is opened
        sock, approval_id = ask(stack, text=f"call {rid}", rid=rid)
        socks.append(sock)
        ids.append(approval_id)
    stack.log_in()
    stack.item(ids[-1])
    stack.wait(lambda d: len(shown_ids(stack)) == 3)
    assert shown_ids(stack) == ids[::-1]
    # Two arriving between polls, and one after: each newer one above.
    for rid in (14, 15):
        sock, approval_id = ask(stack, text=f"call {rid}", rid=rid)
        socks.append(sock)
        ids.append(approval_id)
    stack.wait(lambda d: len(shown_ids(stack)) == 5)
    assert shown_ids(stack) == ids[::-1]
    sock, approval_id = ask(stack, text="call 16", rid=16)
    socks.append(sock)
    ids.append(approval_id)
    stack.item(approval_id)
    assert shown_ids(stack) == ids[::-1]
    stack.driver.refresh()
    stack.wait(lambda d: len(shown_ids(stack)) == 6)
    assert shown_ids(stack) == ids[::-1]
    for sock in socks:
        sock.close()
