"""The errors a call of broker.sock is answered with (05-brokerd "Handling one call").

The call table (`_lifecycle`) gives them in its error replies; broker.sock's
handler raises them and answers them in one place, with the class's wire
code.  Pure: no I/O.
"""

from __future__ import annotations

from .._errors import UnavailableError

__all__ = ["CallFailed", "CallNotRecorded", "RunnerUnavailable", "same_error"]


class CallFailed(UnavailableError):
    """A call the table answers with an error (raised by broker.sock's handler,
    answered by its one translation with the class's code)."""


class RunnerUnavailable(CallFailed):
    """The runner could not run an allowed call; nothing ran."""

    wire_code = "runner_unavailable"
    runbook = "docs/runbook.md#runner-unavailable"


class CallNotRecorded(CallFailed):
    """The call's records could not be written; it is never run or answered `result`."""

    wire_code = "audit_unavailable"
    runbook = "docs/runbook.md#audit-unavailable"


def same_error(one: CallFailed, other: CallFailed) -> bool:
    """Two errors of a reply are the same answer: one class, one message."""
    return type(one) is type(other) and one.args == other.args
