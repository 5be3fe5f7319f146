"""The cool-down of a failing server (12 "Failures, cool-down, leftovers").

A server that fails to start, negotiate or list, or exits before the call
line, 3 times within 10 minutes cools down for 5 minutes: calls meanwhile end
`source_unavailable` without starting anything.  `bxctl mcp restart` ends it.
The time comes in as a value (monotonic seconds).  Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from typing import Final

FAILURES: Final = 3
WINDOW_S: Final = 600.0
COOL_DOWN_S: Final = 300.0


class CoolDown:
    """One server's failures and cool-down."""

    def __init__(self) -> None:
        self._failures: deque[float] = deque(maxlen=FAILURES)
        self._until: float | None = None

    def failure(self, now: float) -> bool:
        """Count a failure; True when it starts a cool-down (to be recorded)."""
        if self.cooling(now):
            return False
        self._failures.append(now)
        if len(self._failures) == FAILURES and now - self._failures[0] <= WINDOW_S:
            self._until = now + COOL_DOWN_S
            self._failures.clear()
            return True
        return False

    def cooling(self, now: float) -> bool:
        if self._until is not None and now >= self._until:
            self._until = None
        return self._until is not None

    def restart(self, now: float) -> bool:
        """The owner ends it; True when there was one to end (recorded as `restarted`)."""
        was = self.cooling(now)
        self._until = None
        self._failures.clear()
        return was

    @property
    def failures(self) -> int:
        return len(self._failures)
