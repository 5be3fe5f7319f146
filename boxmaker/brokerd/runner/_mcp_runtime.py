"""The MCP runtime (12 "Lifecycle"): runs the calls of `mcp.<id>.<local>` tools, trio.

It holds the declared servers and their pins as brokerd loaded them
(`McpServerState`), a cool-down per server, and a launcher (podman's, or the
test launcher).  For one allowed call (a `RunSpec` whose `args` are the
effective arguments): the server's offered tool of that local name, its MCP
name from the pin; cooling down is `source_unavailable` without starting
anything; else one container (`run_mcp_call`).  A start failure (the server
did not start, negotiate or list, or exited before the call line) counts
toward the cool-down; the start of one is told to `on_event` (brokerd writes
the `mcp_server cooling_down` record), as is a drift (`drifted`).

`run_mcp` answers the whole outcome (`McpRun`, what `result.source` records);
`run` answers the runner seam's `RunOutcome`, `source` included, with 12's
statuses as they are: `pin_mismatch` and `source_unavailable` (nothing ran,
the taint unchanged) are recorded so and answered with their own codes by
brokerd's call lifecycle (denial `pin_mismatch`, error `source_unavailable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import trio

from ...proto.mcp import CoolDown, Pin, ServerDecl, UnpinnedReason, split_wire_name, tool_verdicts
from ...proto.tools import RunsOn
from ._mcp_argv import mcp_call_container_name
from ._mcp_call import START_FAILED, McpRun, run_mcp_call
from ._mcp_launch import Launch, McpLauncher
from ._spec import RunOutcome, RunSpec

EventKind = Literal["cooling_down", "drifted"]


@attrs.frozen(kw_only=True)
class McpServerState:
    """One declared server as loaded: its pin, or why it has none."""

    decl: ServerDecl
    pin: Pin | None
    unpinned: UnpinnedReason | None = None


@attrs.frozen(kw_only=True)
class McpEvent:
    """What brokerd records as an `mcp_server` event (the runtime writes nothing)."""

    server: str
    event: EventKind
    call: int
    container: str
    run: McpRun | None
    reason: str


def _no_run(container: str, status: Literal["source_unavailable", "runner_unavailable"],
            message: str) -> McpRun:
    return McpRun(status=status, output=None, message=message, container=container,
                  protocol=None, list_digest=None, request_sha256=None, response_sha256=None,
                  is_error=None, exit=None)


def result_source(server: str, mcp_name: str, run: McpRun) -> dict[str, Any]:
    """`result.source` of an MCP call (04-audit, 12 "Audit records"); no egress yet."""
    return {"kind": "mcp", "server": server, "mcp_name": mcp_name, "container": run.container,
            "protocol": run.protocol, "list_digest": run.list_digest,
            "request_sha256": run.request_sha256, "response_sha256": run.response_sha256,
            "is_error": run.is_error, "exit": run.exit, "egress": [],
            "egress_truncated": False}


class McpRuntime:
    """The runtime of `runs_on = "mcp"`: every `mcp.*` call."""

    kind: Literal["podman"] = "podman"
    serves: frozenset[RunsOn] = frozenset({"mcp"})

    def __init__(self, launcher: McpLauncher, servers: Mapping[str, McpServerState], *,
                 instance: str, version: str,
                 on_event: Callable[[McpEvent], None] | None = None,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.launcher = launcher
        self.servers = dict(servers)
        self.instance = instance
        self.version = version
        self.on_event = on_event
        self.clock = clock
        self.cool_downs: dict[str, CoolDown] = {name: CoolDown() for name in self.servers}

    @property
    def ok(self) -> bool:
        return True

    @property
    def reason(self) -> str | None:
        return None

    async def aclose(self) -> None:
        """Nothing kept between calls: every container is removed with its call."""

    def restart(self, server: str) -> bool:
        """`bxctl mcp restart`: end a cool-down; True when there was one (`restarted`)."""
        cool = self.cool_downs.get(server)
        return cool.restart(self.clock()) if cool is not None else False

    def _tell(self, event: McpEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def mcp_name_of(self, tool: str) -> tuple[McpServerState, str] | None:
        """The pinned server and MCP name of an offered `mcp.<id>.<local>`, or None."""
        split = split_wire_name(tool)
        if split is None:
            return None
        state = self.servers.get(split[0])
        if state is None or state.pin is None:
            return None
        for verdict in tool_verdicts(state.decl, state.pin).values():
            if verdict.status == "offered" and verdict.local == split[1]:
                return state, verdict.mcp_name
        return None

    async def run_mcp(self, spec: RunSpec) -> tuple[McpRun, str | None]:
        """One call: its outcome, and the MCP name (None when nothing could be named)."""
        named = self.mcp_name_of(spec.tool)
        split = split_wire_name(spec.tool)
        server = split[0] if split is not None else "unknown"
        container = mcp_call_container_name(self.instance, server, spec.call_id)
        if named is None:
            return _no_run(container, "runner_unavailable",
                           f"{spec.tool} is not an offered tool of a pinned server"), None
        state, mcp_name = named
        assert state.pin is not None
        cool = self.cool_downs.setdefault(server, CoolDown())
        if cool.cooling(self.clock()):
            return _no_run(container, "source_unavailable",
                           f"the server {server} is cooling down after failing to start "
                           "(bxctl mcp restart ends it)"), mcp_name
        run = await run_mcp_call(
            self.launcher, Launch(decl=state.decl, name=container), pin=state.pin,
            call_id=spec.call_id, mcp_name=mcp_name, arguments=dict(spec.args),
            version=self.version)
        if run.status == START_FAILED and cool.failure(self.clock()):
            self._tell(McpEvent(server=server, event="cooling_down", call=spec.call_id,
                                container=container, run=run,
                                reason=run.message or "the server failed to start"))
        if run.drift is not None:
            self._tell(McpEvent(server=server, event="drifted", call=spec.call_id,
                                container=container, run=run, reason=run.drift.reason()))
        return run, mcp_name

    async def run(self, spec: RunSpec) -> RunOutcome:
        run, mcp_name = await self.run_mcp(spec)
        split = split_wire_name(spec.tool)
        source = (result_source(split[0], mcp_name, run)
                  if split is not None and mcp_name is not None else None)
        return RunOutcome(status=run.status, output=run.output, message=run.message,
                          source=source)
