"""The MCP runtime (12 "Lifecycle"): runs the calls of `mcp.<id>.<local>` tools, trio.

It holds the declared servers and their pins as brokerd loaded them
(`McpServerState`), a cool-down per server, and a launcher (podman's, or the
test launcher).  For one allowed call (a `RunSpec` whose `args` are the
effective arguments): the server's offered tool of that local name, its MCP
name from the pin; cooling down is `source_unavailable` without starting
anything; else its mounts (each `path`/`write_path` argument walked on the
host, `_mcp_mounts.py`; a refusal is `unsafe_target` with nothing started),
its egress (`_mcp_egress.py`: none, or a sidecar sealed to the tool's allowed
hosts, every connection recorded) and one container (`run_mcp_call`).  A
start failure (the server did not start, negotiate or list, or exited before
the call line) counts toward the cool-down; the start of one is told to `on_event` (brokerd writes
the `mcp_server cooling_down` record), as is a drift (`drifted`).

`probe` runs one probe for a pin the same way: the container its calls get,
with egress ``server`` when the server has `hosts` (a ``-net-p`` sidecar
through the same `_sealed` path as a call's, every connection kept), else
none.

`run_mcp` answers the whole outcome (`McpRun`, what `result.source` records);
`run` answers the runner seam's `RunOutcome`, `source` included, with 12's
statuses as they are: `pin_mismatch` and `source_unavailable` (nothing ran,
the taint unchanged) are recorded so and answered with their own codes by
brokerd's call lifecycle (denial `pin_mismatch`, error `source_unavailable`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import trio

from ...proto.mcp import (
    CoolDown,
    Pin,
    ServerDecl,
    ToolVerdict,
    UnpinnedReason,
    split_wire_name,
    tool_verdicts,
)
from ...proto.tools import RunsOn
from ._egress import EgressProxy, EgressRules, Resolver, system_resolver
from ._host_walk import HostWalker, UnsafeTarget
from ._mcp_argv import mcp_call_container_name
from ._mcp_call import START_FAILED, McpProbe, McpRun, probe_mcp_server, run_mcp_call
from ._mcp_egress import egress_records, egress_rules, sealed_egress, server_rules
from ._mcp_launch import Launch, McpLauncher
from ._mcp_mounts import plan_mcp_mounts
from ._mounts import MaskSources, Mount
from ._podman_argv import UNAVAILABLE
from ._podman_check import PodmanCommandError
from ._spec import RunOutcome, RunSpec
from ._three_steps import MountIdentity

Planned = tuple[tuple[Mount, ...], tuple[MountIdentity, ...]]
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


NoRun = Literal["source_unavailable", "runner_unavailable", "unsafe_target"]
_T = TypeVar("_T")


def _no_run(container: str, status: NoRun, message: str) -> McpRun:
    return McpRun(status=status, output=None, message=message, container=container,
                  protocol=None, list_digest=None, request_sha256=None, response_sha256=None,
                  is_error=None, exit=None)


def result_source(server: str, mcp_name: str, run: McpRun) -> dict[str, Any]:
    """`result.source` of an MCP call (04-audit, 12 "Audit records")."""
    return {"kind": "mcp", "server": server, "mcp_name": mcp_name, "container": run.container,
            "protocol": run.protocol, "list_digest": run.list_digest,
            "request_sha256": run.request_sha256, "response_sha256": run.response_sha256,
            "is_error": run.is_error, "exit": run.exit, "egress": list(run.egress),
            "egress_truncated": run.egress_truncated}


class McpRuntime:
    """The runtime of `runs_on = "mcp"`: every `mcp.*` call."""

    kind: Literal["podman"] = "podman"
    serves: frozenset[RunsOn] = frozenset({"mcp"})

    def __init__(self, launcher: McpLauncher, servers: Mapping[str, McpServerState], *,
                 instance: str, version: str,
                 on_event: Callable[[McpEvent], None] | None = None,
                 clock: Callable[[], float] = trio.current_time,
                 walker: HostWalker | None = None,
                 masks: Callable[[], MaskSources] | None = None,
                 call_dir: Callable[[str], Path] | None = None,
                 resolver: Resolver = system_resolver) -> None:
        self.launcher = launcher
        self.call_dir = call_dir
        """A fresh per-call directory of brokerd's scratch (the egress socket's); None:
        a call with egress is `runner_unavailable`."""
        self.resolver = resolver
        self.walker = walker
        """The host walker over brokerd's protected set (None: no path argument is
        mounted, a call with one is `unsafe_target`)."""
        self.masks = masks
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
        """Every container is removed with its call; the oci launcher's image mounts go."""
        close = getattr(self.launcher, "aclose", None)
        if close is not None:
            await close()

    def restart(self, server: str) -> bool:
        """`bxctl mcp restart`: end a cool-down; True when there was one (`restarted`)."""
        cool = self.cool_downs.get(server)
        return cool.restart(self.clock()) if cool is not None else False

    def _tell(self, event: McpEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def mcp_name_of(self, tool: str) -> tuple[McpServerState, str] | None:
        """The pinned server and MCP name of an offered `mcp.<id>.<local>`, or None."""
        found = self.offered(tool)
        return None if found is None else (found[0], found[1].mcp_name)

    def offered(self, tool: str) -> tuple[McpServerState, ToolVerdict] | None:
        """The pinned server and the verdict of an offered `mcp.<id>.<local>`, or None."""
        split = split_wire_name(tool)
        if split is None:
            return None
        state = self.servers.get(split[0])
        if state is None or state.pin is None:
            return None
        for verdict in tool_verdicts(state.decl, state.pin).values():
            if verdict.status == "offered" and verdict.local == split[1]:
                return state, verdict
        return None

    async def _mounts(self, spec: RunSpec, verdict: ToolVerdict) -> Planned | str:
        """The call's mounts, walked on the host (a thread), or why there are none."""
        grammar = verdict.grammar
        if grammar is None or not any(k in ("path", "write_path")
                                      for k in grammar.kinds.values()):
            return ""
        walker, masks = self.walker, self.masks
        if walker is None or masks is None:
            return "no host walker: a path argument cannot be mounted"
        entries = {name: paths for name, paths in spec.mcp_paths}
        return await trio.to_thread.run_sync(
            lambda: plan_mcp_mounts(walker, grammar, spec.args, entries=entries,
                                    deny_paths=spec.deny_paths, masks=masks()))

    async def run_mcp(self, spec: RunSpec) -> tuple[McpRun, str | None]:
        """One call: its outcome, and the MCP name (None when nothing could be named)."""
        named = self.offered(spec.tool)
        split = split_wire_name(spec.tool)
        server = split[0] if split is not None else "unknown"
        container = mcp_call_container_name(self.instance, server, spec.call_id)
        if named is None:
            return _no_run(container, "runner_unavailable",
                           f"{spec.tool} is not an offered tool of a pinned server"), None
        state, verdict = named
        mcp_name = verdict.mcp_name
        assert state.pin is not None
        cool = self.cool_downs.setdefault(server, CoolDown())
        if cool.cooling(self.clock()):
            return _no_run(container, "source_unavailable",
                           f"the server {server} is cooling down after failing to start "
                           "(bxctl mcp restart ends it)"), mcp_name
        try:
            planned = await self._mounts(spec, verdict)
        except UnsafeTarget as exc:
            return _no_run(container, "unsafe_target", str(exc)), mcp_name
        except OSError as exc:
            return _no_run(container, "runner_unavailable",
                           f"the call could not be set up ({exc.strerror or exc}). "
                           f"{UNAVAILABLE}"), mcp_name
        if isinstance(planned, str):
            if planned:
                return _no_run(container, "unsafe_target", planned), mcp_name
            launch = Launch(decl=state.decl, name=container)
        else:
            launch = Launch(decl=state.decl, name=container, mounts=planned[0],
                            identities=planned[1])
        rules = egress_rules(state.decl, mcp_name, verdict.grammar, spec.args,
                             spec.mcp_private_network)
        if rules is None:
            run = await run_mcp_call(self.launcher, launch, pin=state.pin,
                                     call_id=spec.call_id, mcp_name=mcp_name,
                                     arguments=dict(spec.args), version=self.version)
        else:
            run = await self._with_egress(rules, launch, state.pin, spec, mcp_name)
        if run.status == START_FAILED and cool.failure(self.clock()):
            self._tell(McpEvent(server=server, event="cooling_down", call=spec.call_id,
                                container=container, run=run,
                                reason=run.message or "the server failed to start"))
        if run.drift is not None:
            self._tell(McpEvent(server=server, event="drifted", call=spec.call_id,
                                container=container, run=run, reason=run.drift.reason()))
        return run, mcp_name

    async def _with_egress(self, rules: EgressRules, launch: Launch, pin: Pin, spec: RunSpec,
                           mcp_name: str) -> McpRun:
        """One call whose container shares a sidecar's network, sealed to `rules`."""

        async def call(sidecar: str) -> McpRun:
            return await run_mcp_call(self.launcher, attrs.evolve(launch, network_of=sidecar),
                                      pin=pin, call_id=spec.call_id, mcp_name=mcp_name,
                                      arguments=dict(spec.args), version=self.version)

        run, egress, truncated = await self._sealed(
            rules, launch.decl, launch.name, call,
            lambda status, message: _no_run(launch.name, status, message))
        return attrs.evolve(run, egress=egress, egress_truncated=truncated)

    async def probe(self, decl: ServerDecl, name: str) -> McpProbe:
        """One probe for a pin (12 "What a pin covers"): the container `name` its calls
        get, with egress ``server`` (its `hosts`, a ``-net-p`` sidecar, every connection
        in `McpProbe.egress`) when `hosts` is non-empty, else no network."""

        async def probe(sidecar: str | None) -> McpProbe:
            return await probe_mcp_server(self.launcher, decl, lambda: name,
                                          version=self.version, network_of=sidecar)

        rules = server_rules(decl)
        if rules is None:
            return await probe(None)
        found, egress, truncated = await self._sealed(
            rules, decl, name, probe,
            lambda _, message: McpProbe(listed=None, problem=message, containers=(name,)))
        return attrs.evolve(found, egress=egress, egress_truncated=truncated)

    async def _sealed(self, rules: EgressRules, decl: ServerDecl, container: str,
                      body: Callable[[str], Awaitable[_T]],
                      failed: Callable[[NoRun, str], _T]
                      ) -> tuple[_T, tuple[dict[str, Any], ...], bool]:
        """`body` run with the sidecar of `container` sealed to `rules` (a call's or a
        probe's, 12 "Egress"), or `failed` when it could not be set up; the connections."""
        if self.call_dir is None:
            return failed("runner_unavailable",
                          f"no scratch directory for the egress socket. {UNAVAILABLE}"), (), False
        proxy: EgressProxy | None = None
        try:
            async with sealed_egress(
                    self.launcher, rules, container=container, call_dir=self.call_dir,
                    ready_timeout_s=decl.start_timeout_ms / 1000,
                    resolver=self.resolver) as (sidecar, proxy):
                out = await body(sidecar)
        except PodmanCommandError as exc:
            out = failed("source_unavailable", str(exc))
        except OSError as exc:
            out = failed("runner_unavailable",
                         f"the egress socket could not be set up ({exc.strerror or exc}). "
                         f"{UNAVAILABLE}")
        egress, truncated = egress_records(proxy)
        return out, egress, truncated

    async def run(self, spec: RunSpec) -> RunOutcome:
        run, mcp_name = await self.run_mcp(spec)
        split = split_wire_name(spec.tool)
        source = (result_source(split[0], mcp_name, run)
                  if split is not None and mcp_name is not None else None)
        return RunOutcome(status=run.status, output=run.output, message=run.message,
                          source=source)
