"""Issue 22 item 1 in a real browser: from any page the owner visits, many
`no-cors` POSTs with a body to the approval page (Chromium spoke HTTP/2 to
hypercorn over TLS, and ten such requests ended the page).  The real page
process, real brokerd, headless Chromium trusting the page's local CA."""

from __future__ import annotations

import pytest

from tests.approvals.browser import Stack, browser_missing

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(browser_missing() is not None,
                                 reason=browser_missing() or "")]

FLOOD = """
const [origin, done] = [arguments[0], arguments[arguments.length - 1]];
const posts = [];
for (let i = 0; i < 20; i++) {
  posts.push(fetch(origin + "/api/refuse", {method: "POST", mode: "no-cors",
                                            body: "x".repeat(1e5)}).then(() => "answered",
                                                                         e => String(e)));
}
Promise.all(posts).then(done);
"""

PROTOCOL = """
const done = arguments[arguments.length - 1];
fetch("/api/state").then(r => r.json()).then(state => {
  const entry = performance.getEntriesByType("resource").pop();
  done([state.origin, entry ? entry.nextHopProtocol : "?"]);
}, e => done([String(e), "?"]));
"""


def test_no_cors_posts_from_another_page_do_not_end_the_page(stack: Stack) -> None:
    stack.driver.get("about:blank")  # not the page's origin: any site the owner visits
    stack.driver.execute_async_script(FLOOD, stack.origin)
    stack.driver.execute_async_script(FLOOD, stack.origin)
    assert stack.page.proc.poll() is None, "the page exited"
    stack.driver.get(stack.origin + "/")
    origin, protocol = stack.driver.execute_async_script(PROTOCOL)
    assert origin == stack.origin and protocol == "http/1.1"
    assert stack.page.proc.poll() is None
