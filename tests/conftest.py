"""Shared test configuration."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, settings

# Wall-clock checks are not tests of this code (no timed tests, the developers'
# guide): on a busy 2-core machine hypothesis's own `too_slow` health check and
# per-example deadline fail property tests that pass.  Speed is measured by
# scripts/bench/ instead.
#
# How many examples: BOXMAKER_HYPOTHESIS picks a profile.  `default` is
# hypothesis's own count; `ci` (.ci/run) fewer, to keep CI well under its time
# limit; `deep` ten times the default, for a long run by hand
# (BOXMAKER_HYPOTHESIS=deep ./scripts/test tests/policy).  A test that sets its
# own count, because it needs more than the default, says so with
# `examples(n)`: n under `default`, scaled like the profile's count otherwise.
HYPOTHESIS_EXAMPLES = {"default": 100, "ci": 30, "deep": 1000}
HYPOTHESIS_PROFILE = os.environ.get("BOXMAKER_HYPOTHESIS") or "default"
if HYPOTHESIS_PROFILE not in HYPOTHESIS_EXAMPLES:
    raise pytest.UsageError(f"BOXMAKER_HYPOTHESIS is one of "
                            f"{', '.join(HYPOTHESIS_EXAMPLES)}, not {HYPOTHESIS_PROFILE!r}")
for _name, _count in HYPOTHESIS_EXAMPLES.items():
    settings.register_profile(f"boxmaker-{_name}", max_examples=_count, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(f"boxmaker-{HYPOTHESIS_PROFILE}")


def examples(default: int, profile: str | None = None, *, at_least: int = 10) -> int:
    """A test's own example count `default`, scaled to the chosen profile (never below
    `at_least`, nor below `default` when that is smaller).  A test whose every example
    starts real daemons lowers `at_least`."""
    count = HYPOTHESIS_EXAMPLES[profile or HYPOTHESIS_PROFILE]
    return max(min(default, at_least), default * count // HYPOTHESIS_EXAMPLES["default"])

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


# --- the skipped real-peer tests, counted for scripts/test's last line (issue 27) ---

PEERS: dict[str, tuple[str, ...]] = {
    "podman": ("podman", "tools image", "runc", "crun"),
    "llama-server": ("llama", "local model", "get-llama-server"),
    "Chromium": ("chromium", "browser", "chromedriver", "selenium"),
    "FUSE": ("fuse",),
    "systemd": ("systemd",),
    "MCP reference server": ("mcp reference server",),
}
SETUP_COMMAND = "./scripts/ci-prepare"


def peer_of(reason: str) -> str | None:
    """Which real peer a skip reason says is missing, if any (root and the like are not)."""
    lowered = reason.lower()
    for peer, words in PEERS.items():
        if any(word in lowered for word in words):
            return peer
    return None


def skip_line(reasons: list[str]) -> str | None:
    """The one line scripts/test ends with when real-peer tests were skipped."""
    counts: dict[str, int] = {}
    for reason in reasons:
        peer = peer_of(reason)
        if peer is not None:
            counts[peer] = counts.get(peer, 0) + 1
    if not counts:
        return None
    total = sum(counts.values())
    each = ", ".join(f"{peer} {n}" for peer, n in sorted(counts.items()))
    return (f"skipped: {total} real-peer test{'s' if total != 1 else ''} ({each}); "
            f"{SETUP_COMMAND} sets them up, then run ./scripts/test again")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Write the skip line where scripts/test reads it (BOXMAKER_SKIP_LINE), if asked."""
    target = os.environ.get("BOXMAKER_SKIP_LINE")
    if not target:
        return
    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            reasons.append(str(longrepr[2]))
    line = skip_line(reasons)
    Path(target).write_text(line + "\n" if line else "", encoding="utf-8")
