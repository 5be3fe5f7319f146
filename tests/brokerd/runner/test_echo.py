"""The echo runtime: echo answered in-process, every other tool runner_unavailable."""

from __future__ import annotations

from boxmaker.brokerd.runner._echo import EchoRuntime
from boxmaker.brokerd.runner._spec import build_run_spec


def spec(tool: str, args: dict[str, object]) -> object:
    return build_run_spec(call_id=3, session="s1", tool=tool, args=args,  # type: ignore[arg-type]
                          grant="g", grant_entry=None, private_network=False, label="public",
                          untrusted=False)


async def test_echo_and_others() -> None:
    runtime = EchoRuntime()
    assert runtime.ok and runtime.kind == "echo"
    outcome = await runtime.run(spec("echo", {"text": "héllo\n"}))  # type: ignore[arg-type]
    assert outcome.status == "ok" and outcome.output == {"text": "héllo\n"}
    other = await runtime.run(spec("read_file", {"path": "/x"}))  # type: ignore[arg-type]
    assert other.status == "runner_unavailable" and other.output is None
    bad = await runtime.run(spec("echo", {}))  # type: ignore[arg-type]
    assert bad.status == "tool_failed"
    await runtime.aclose()
