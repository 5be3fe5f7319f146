"""The accept loop of every daemon's Unix socket (05-brokerd "Serving"): trio.

It pauses (backing off up to 1 s) when descriptors or memory run out and
raises `ListenerLost` on any other failure of the listener.  A connection that
waits for something else than this socket (brokerd's call waiting for the
owner, which `[approvals] max_pending` bounds) gives its place under
`max_connections` back with `leave_connection_places` (issue 22 item 9).  Binding and the
peer checks are `boxmaker._sockets._unix`, which loads no trio.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

import trio

from ._unix import ListenerLost

log = logging.getLogger("boxmaker.sockets")

CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""Running out of descriptors or memory: pause the listener, do not stop."""
TRANSIENT_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EAGAIN,
                              errno.EINTR})
"""One connection went wrong before it was accepted: try the next one."""
BACKOFF_FIRST = 0.01
BACKOFF_MAX = 1.0


async def accept_loop(
    listener: trio.socket.SocketType,
    handle: Callable[[trio.socket.SocketType], Awaitable[None]],
    nursery: trio.Nursery,
    *,
    name: str,
    max_connections: int | None = None,
) -> None:
    """Accept forever, one task per connection; pause on exhaustion, raise ListenerLost.

    With `max_connections`, at most that many connections are served at once:
    past it, accepting pauses until one ends (the kernel's backlog holds the
    rest), so that many peers each sending a large frame cannot exhaust memory.
    """
    backoff = BACKOFF_FIRST
    limiter = trio.CapacityLimiter(max_connections) if max_connections is not None else None
    while True:
        token = object()
        if limiter is not None:
            await limiter.acquire_on_behalf_of(token)
        try:
            conn, _ = await listener.accept()
        except BaseException as exc:
            if limiter is not None:  # no connection came of it: the place is free again
                limiter.release_on_behalf_of(token)
            if isinstance(exc, trio.ClosedResourceError):
                raise ListenerLost(f"the {name} listener was closed") from exc
            if not isinstance(exc, OSError):
                raise
            if exc.errno in CAPACITY_ERRNOS:
                log.warning("%s listener paused for %.2f s: %s", name, backoff,
                            os.strerror(exc.errno or 0))
                await trio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            if exc.errno in TRANSIENT_ERRNOS:
                continue
            raise ListenerLost(f"the {name} listener failed ({exc.strerror or exc})") from exc
        backoff = BACKOFF_FIRST
        if limiter is None:
            nursery.start_soon(handle, conn)
        else:
            nursery.start_soon(_limited, handle, conn, limiter, token)


_PLACE: ContextVar[Callable[[], None] | None] = ContextVar("boxmaker_connection_place",
                                                          default=None)
"""The place under `max_connections` of the connection this task serves (its
task's own context: `_limited` sets it, nothing else reads it)."""


def leave_connection_places() -> bool:
    """The calling connection task gives back its place under `max_connections`.

    For a connection that now waits for something bounded elsewhere (a call
    waiting for the owner).  Once per connection; False when it held none
    (no limit, or already given back).
    """
    give_back = _PLACE.get()
    if give_back is None:
        return False
    _PLACE.set(None)
    give_back()
    return True


async def _limited(handle: Callable[[trio.socket.SocketType], Awaitable[None]],
                   conn: trio.socket.SocketType, limiter: trio.CapacityLimiter,
                   token: object) -> None:
    held = True

    def give_back() -> None:
        nonlocal held
        if held:
            held = False
            limiter.release_on_behalf_of(token)

    _PLACE.set(give_back)
    try:
        await handle(conn)
    finally:
        _PLACE.set(None)
        give_back()
