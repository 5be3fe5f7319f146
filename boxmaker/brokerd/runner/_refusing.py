"""The `refusing` runtime (05-brokerd): the default until a runner is configured.

It runs nothing: every allowed call ends `runner_unavailable`.
"""

from __future__ import annotations

from typing import Literal

from ...proto.tools import RunsOn
from ._spec import RunOutcome, RunSpec

REFUSING_REASON = "no runner is configured ([runner] kind = \"refusing\")"


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
