"""The `echo` runtime (05-brokerd): answers the test tool `echo` in-process.

It runs the catalogue's tools of the `test` runtime kind; every other tool is
`runner_unavailable`.  It exists so that tests and benchmarks can drive the
whole decision path with real processes.
"""

from __future__ import annotations

from typing import Literal

from ...proto.tools import CATALOGUE, RunsOn
from ._spec import RunOutcome, RunSpec

ECHO_ONLY_REASON = "the echo runtime runs only the test tool echo"


class EchoRuntime:
    kind: Literal["echo"] = "echo"
    serves: frozenset[RunsOn] = frozenset({"test"})
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return True

    async def run(self, spec: RunSpec) -> RunOutcome:
        entry = CATALOGUE.get(spec.tool)
        if entry is None or entry.runs_on not in self.serves:
            return RunOutcome(status="runner_unavailable", output=None, message=ECHO_ONLY_REASON)
        text = spec.args.get("text")
        if not isinstance(text, str):  # the policy parsed the arguments: our bug if not
            return RunOutcome(
                status="tool_failed",
                output={"error": {"code": "bad_args", "message": "echo needs a text"}},
                message="echo without text",
            )
        return RunOutcome(status="ok", output={"text": text})

    async def aclose(self) -> None:
        return None
