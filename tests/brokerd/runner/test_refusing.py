"""The refusing runtime: every allowed call is runner_unavailable, nothing runs."""

from __future__ import annotations

from boxmaker.brokerd.runner._refusing import REFUSING_REASON, RefusingRuntime
from boxmaker.brokerd.runner._spec import build_run_spec


async def test_refuses_everything() -> None:
    runtime = RefusingRuntime()
    assert not runtime.ok and runtime.reason == REFUSING_REASON
    spec = build_run_spec(call_id=1, session="s1", tool="echo", args={"text": "x"}, grant="g",
                          grant_entry=None, private_network=False, label="public",
                          untrusted=False)
    outcome = await runtime.run(spec)
    assert outcome.status == "runner_unavailable" and outcome.output is None
    assert outcome.message == REFUSING_REASON
    await runtime.aclose()
