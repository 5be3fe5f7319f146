"""The errors a call of broker.sock is answered with (05-brokerd "Handling one call").

The call table (`_lifecycle`) answers them: its error reply is the wire
answer of one (`proto.wire.answer_of`, the class's wire code), as a raised one
is answered by broker.sock's handler.  Pure: no I/O.
"""

from __future__ import annotations

from .._errors import UnavailableError

__all__ = ["CallFailed", "CallNotRecorded", "CommandsUnconfigured", "RunnerUnavailable",
           "SourceUnavailableAnswer", "runner_unavailable"]


class CallFailed(UnavailableError):
    """A call the table answers with an error (raised by broker.sock's handler,
    answered by its one translation with the class's code)."""


class RunnerUnavailable(CallFailed):
    """The runner could not run an allowed call; nothing ran."""

    wire_code = "runner_unavailable"
    runbook = "docs/runbook.md#runner-unavailable"


class CommandsUnconfigured(RunnerUnavailable):
    """run_command without `[commands]`: nothing ran (12-tool-sources "Runbook anchors")."""

    runbook = "docs/runbook.md#commands-unconfigured"
    answer_runbook = runbook
    """Answered with this pointer, not the code's own (`proto.wire.answer_of`)."""


class SourceUnavailableAnswer(CallFailed):
    """An `mcp.*` call whose server did not start, negotiate or list, exited before
    the call line, or is cooling down: not sent (12-tool-sources; recorded
    `source_unavailable`, answered `error source_unavailable`).  A server's
    `pin_mismatch` is a denial (`_call_events.denied`), not an error."""

    wire_code = "source_unavailable"
    runbook = "docs/runbook.md#source-unavailable"


class CallNotRecorded(CallFailed):
    """The call's records could not be written; it is never run or answered `result`."""

    wire_code = "audit_unavailable"
    runbook = "docs/runbook.md#audit-unavailable"


def runner_unavailable(runbook: str | None, message: str) -> RunnerUnavailable:
    """The error of a call the runner could not run: `CommandsUnconfigured` when the
    runtime gave its pointer (`RunOutcome.runbook`), else `RunnerUnavailable`."""
    if runbook == CommandsUnconfigured.runbook:
        return CommandsUnconfigured(message)
    return RunnerUnavailable(message)

