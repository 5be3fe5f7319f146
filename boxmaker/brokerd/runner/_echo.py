"""The `echo` runtime (05-brokerd): answers the test tool `echo` in-process.

Every other tool is `runner_unavailable`.  It exists so that tests and
benchmarks can drive the whole decision path with real processes.
"""

from __future__ import annotations

from ._spec import RunOutcome, RunSpec

ECHO_ONLY_REASON = "the echo runtime runs only the test tool echo"


class EchoRuntime:
    kind = "echo"
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return True

    async def run(self, spec: RunSpec) -> RunOutcome:
        if spec.tool != "echo":
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
