"""The accept loop's pause and its lost listener (boxmaker/_sockets/_unix_accept.py)."""

from __future__ import annotations

import errno
import functools
import os
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker._sockets._unix import ListenerLost
from boxmaker._sockets._unix_accept import BACKOFF_MAX, accept_loop


class FlakyListener:
    """accept() fails with the given errnos first, then hands out a socket each time."""

    def __init__(self, errnos: list[int]) -> None:
        self.errnos = errnos
        self.times: list[float] = []

    async def accept(self) -> tuple[Any, Any]:
        await trio.lowlevel.checkpoint()
        self.times.append(trio.current_time())
        if self.errnos:
            code = self.errnos.pop(0)
            raise OSError(code, os.strerror(code))
        await trio.sleep_forever()
        raise AssertionError


async def test_accept_pauses_on_exhaustion(autojump_clock: trio.testing.MockClock) -> None:
    listener = FlakyListener([errno.EMFILE] * 9 + [errno.ENFILE, errno.ECONNABORTED])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(accept_loop, listener, None, nursery,  # type: ignore[arg-type]
                                             name="test"))
        await trio.sleep(30)
        nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in zip(listener.times, listener.times[1:], strict=False)]
    assert gaps[0] == pytest.approx(0.01)
    assert max(gaps) == pytest.approx(BACKOFF_MAX)  # doubling, capped at 1 s
    assert len(listener.times) == 12


async def test_other_listener_failure_is_lost() -> None:
    async with trio.open_nursery() as nursery:
        with pytest.raises(ListenerLost, match="failed"):
            await accept_loop(FlakyListener([errno.EBADF]), None, nursery,  # type: ignore[arg-type]
                              name="test")
