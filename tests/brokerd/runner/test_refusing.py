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


async def test_run_command_without_commands_points_at_its_own_anchor() -> None:
    from boxmaker.brokerd.runner._refusing import (
        COMMANDS_UNCONFIGURED_REASON,
        UnconfiguredCommandsRuntime,
    )
    runtime = UnconfiguredCommandsRuntime()
    assert runtime.serves == {"commands"} and not runtime.ok
    spec = build_run_spec(call_id=2, session="s1", tool="run_command",
                          args={"argv": ["git", "log"], "cwd": "/w"}, grant="g",
                          grant_entry="/w", private_network=False, label="public",
                          untrusted=True)
    outcome = await runtime.run(spec)
    assert outcome.status == "runner_unavailable" and outcome.output is None
    assert outcome.message == COMMANDS_UNCONFIGURED_REASON
    assert outcome.runbook == "docs/runbook.md#commands-unconfigured"
