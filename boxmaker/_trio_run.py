"""`trio.run` for a command line: one failure comes out as itself, not in a group.

A nursery (strict exception groups) wraps whatever a child or its `start`
raised in an ExceptionGroup, so a command's ``except OSError`` around
`trio.run` never matched and the owner saw a traceback instead of the reason.
`run` unwraps a group that holds exactly one exception (at any depth); a group
of several is left as it is (a real multiple failure, shown whole).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import trio

T = TypeVar("T")


def leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    """The exceptions of a group, nested groups flattened."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from leaves(exc)
        else:
            yield exc


def run(function: Callable[[], Awaitable[T]]) -> T:
    """`trio.run(function)`, a group of one failure raised as that failure."""
    try:
        return trio.run(function)
    except BaseExceptionGroup as group:
        found = list(leaves(group))
        if len(found) == 1:
            raise found[0] from None
        raise
