"""Shared test configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """pytest-trio's autojump clock, but jumping only after 20 ms of real idleness.

    Many timing tests here talk over real sockets (an in-process fake server):
    bytes in flight in the kernel leave every task blocked for a moment, and a
    clock that jumps at once would take that for idleness and fire a deadline
    early under load.  Tests that need it can still lower the threshold.
    """
    return trio.testing.MockClock(autojump_threshold=0.02)
