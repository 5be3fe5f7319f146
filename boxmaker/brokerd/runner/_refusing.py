"""The `refusing` runtime (05-brokerd): the default until a runner is configured.

It runs nothing: every allowed call ends `runner_unavailable`.
"""

from __future__ import annotations

from typing import Final, Literal

from ..._error_table import pointer_of
from ..._errors import UnavailableError
from ...proto.tools import RunsOn
from ._spec import RunOutcome, RunSpec

REFUSING_REASON = "no runner is configured ([runner] kind = \"refusing\")"
COMMANDS_UNCONFIGURED_REASON: Final = (
    "run_command has no commands image: brokerd.toml has no [commands] table")


class CommandsUnconfigured(UnavailableError):
    """run_command without `[commands]`: answered `runner_unavailable` with its own
    pointer (12-tool-sources "Runbook anchors"; the call's error is brokerd's
    `_call_errors.CommandsUnconfigured`)."""

    wire_code = "runner_unavailable"
    runbook = "docs/runbook.md#commands-unconfigured"


class RefusingRuntime:
    kind: Literal["refusing"] = "refusing"
    serves: frozenset[RunsOn] = frozenset()

    def __init__(self, reason: str = REFUSING_REASON) -> None:
        self.reason = reason

    @property
    def ok(self) -> bool:
        return False

    async def run(self, spec: RunSpec) -> RunOutcome:
        return RunOutcome(status="runner_unavailable", output=None, message=self.reason)

    async def aclose(self) -> None:
        return None


class UnconfiguredCommandsRuntime:
    """What serves `commands` when brokerd.toml has no `[commands]`: every allowed
    run_command call is answered `runner_unavailable`, `#commands-unconfigured`."""

    kind: Literal["refusing"] = "refusing"
    serves: frozenset[RunsOn] = frozenset({"commands"})

    def __init__(self, reason: str = COMMANDS_UNCONFIGURED_REASON) -> None:
        self.reason = reason

    @property
    def ok(self) -> bool:
        return False

    async def run(self, spec: RunSpec) -> RunOutcome:
        return RunOutcome(status="runner_unavailable", output=None, message=self.reason,
                          runbook=pointer_of(CommandsUnconfigured))

    async def aclose(self) -> None:
        return None
