"""brokerd's runtimes: one per runtime kind, a call to the one its tool runs on."""

from __future__ import annotations

import attrs
import pytest
import trio

from boxmaker.brokerd.runner._echo import ECHO_ONLY_REASON, EchoRuntime
from boxmaker.brokerd.runner._refusing import REFUSING_REASON, RefusingRuntime
from boxmaker.brokerd.runner._runtimes import Runtimes
from boxmaker.brokerd.runner._spec import RunOutcome, RunSpec, build_run_spec
from boxmaker.proto.tools import CATALOGUE, RunsOn


def spec(tool: str, args: dict[str, object]) -> RunSpec:
    return build_run_spec(call_id=3, session="s1", tool=tool, args=args, grant="g",
                          grant_entry=None, private_network=False, label="public",
                          untrusted=False)


@attrs.define
class Recording:
    """A runtime of its own kinds that records what it was handed."""

    serves: frozenset[RunsOn]
    kind: str = "podman"
    ok: bool = True
    reason: str | None = None
    ran: list[str] = attrs.field(factory=list)
    closed: int = 0

    async def run(self, spec: RunSpec) -> RunOutcome:
        self.ran.append(spec.tool)
        return RunOutcome(status="ok", output={})

    async def aclose(self) -> None:
        self.closed += 1


async def test_each_tool_goes_to_the_runtime_of_its_kind() -> None:
    files = Recording(serves=frozenset({"files"}))
    fetch = Recording(serves=frozenset({"fetch"}), kind="echo")
    commands = Recording(serves=frozenset({"commands"}), kind="refusing")
    runtimes = Runtimes(files, [fetch, commands])  # type: ignore[list-item]
    for tool in CATALOGUE.names:
        await runtimes.run(spec(tool, {}))
    assert files.ran == ["read_file", "list_dir", "write_file", "echo"]  # echo: no test runtime
    assert fetch.ran == ["http_fetch"]
    assert commands.ran == ["run_command"]
    assert runtimes.by_kind == {"files": files, "fetch": fetch, "commands": commands}
    assert (runtimes.kind, runtimes.ok, runtimes.reason) == ("podman", True, None)
    await runtimes.aclose()
    assert (files.closed, fetch.closed) == (1, 1)


async def test_a_kind_nothing_serves_is_answered_by_the_configured_runtime() -> None:
    """As before the catalogue: the echo runtime runs only echo, in its own words."""
    runtimes = Runtimes(EchoRuntime())
    assert runtimes.for_tool("echo") is runtimes.main
    echo = await runtimes.run(spec("echo", {"text": "hi"}))
    assert echo.status == "ok" and echo.output == {"text": "hi"}
    other = await runtimes.run(spec("read_file", {"path": "/x"}))
    assert (other.status, other.message) == ("runner_unavailable", ECHO_ONLY_REASON)
    unknown = await runtimes.run(spec("no_such_tool", {}))
    assert unknown.status == "runner_unavailable"
    refusing = Runtimes(RefusingRuntime())
    assert refusing.by_kind == {} and not refusing.ok and refusing.reason == REFUSING_REASON
    assert (await refusing.run(spec("http_fetch", {}))).message == REFUSING_REASON


def test_two_runtimes_of_one_kind_are_refused() -> None:
    with pytest.raises(ValueError, match="two runtimes serve files"):
        Runtimes(Recording(serves=frozenset({"files"})),  # type: ignore[arg-type]
                 [Recording(serves=frozenset({"files", "fetch"}))])  # type: ignore[list-item]


@attrs.define
class Serving(Recording):
    """A runtime with work behind its answers: `serve` holds until cancelled."""

    serving: int = 0
    ended: int = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        self.serving += 1
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self.ended += 1


async def test_serve_runs_each_serving_runtime_until_cancelled() -> None:
    files = Recording(serves=frozenset({"files"}))
    commands = Serving(serves=frozenset({"commands"}))
    runtimes = Runtimes(files, [commands])  # type: ignore[list-item]
    async with trio.open_nursery() as nursery:
        await nursery.start(runtimes.serve)
        assert (commands.serving, commands.ended) == (1, 0)
        nursery.cancel_scope.cancel()
    assert commands.ended == 1
    # with nothing to serve it returns once started
    with trio.fail_after(5):
        await Runtimes(files).serve()
