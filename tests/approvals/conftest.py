"""The browser tests' shared stack: brokerd, the page and headless Chromium (browser.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.approvals.browser import Stack


@pytest.fixture
def stack() -> Iterator[Stack]:
    made = Stack()
    try:
        yield made
    finally:
        made.close()
