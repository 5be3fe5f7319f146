"""admin.sock's MCP requests (12-tool-sources "Pinning", "Wire changes"): the owner's
side of the tool sources.

- `sources_check`: the sources report as brokerd loads it now.
- `mcp_status`: each declared server: pinned, unpinned (and why) or cooling
  down; its pin, offered and disabled tools, failures; with `server` only that
  one, with each offered tool as the model sees it (broker.sock's `tools`
  item) and the kinds and egress brokerd derives (`bxctl mcp show`).
- `mcp_probe`: the `mcp_server probe` record is appended, then the server is
  run as its calls are (`McpRuntime.probe`: the era probe for ``auto``, egress
  ``server`` through a ``-net-p`` sidecar when it has `hosts`, its connections
  then in an `mcp_server probed` record), its whole list read, and the answer
  is what a pin would hold: the digest, each tool against the current pin, and
  `invalidates`.  The probe is
  held 10 minutes for one pin (`ProbeTable`).
- `mcp_pin`: the probe's digest and `invalidates` must be the request's (the
  owner confirmed what they were shown) and the declaration unchanged since;
  under `[approvals] require_passkey` (or with an assertion) the assertion is
  over `pin_challenge` (kept with its challenge sidecar, `_pin_assertion`);
  then the pin file is written durably, `mcp_pin pinned` appended, and only
  then is the pin used.
- `mcp_unpin`: `mcp_pin unpinned` appended, then the server offers nothing.
- `mcp_restart`: ends a cool-down (`mcp_server restarted`, recorded only when
  there was one).
"""

from __future__ import annotations

import logging

import attrs
import trio

from .._errors import ConfigurationError, PeerError, UnavailableError
from .._pin_assertion import pin_sidecar_bytes
from .._sockets._unix import PeerCred
from ..policy._mcp_invalidates import invalidated
from ..proto._convert import U64, JsonObject, structure
from ..proto._escape import escape_line
from ..proto.audit import EgressRecord, McpServerRecord, PasskeyUse
from ..proto.mcp import (
    ServerDecl,
    UnpinnableList,
    default_egress,
    pin_challenge,
    pin_source,
    pin_tools,
    probe_tools,
    split_wire_name,
    tool_verdicts,
)
from ..proto.wire import (
    AdminAnswer,
    DisabledTool,
    FieldDiff,
    Invalidated,
    McpPinRequest,
    McpProbeAnswer,
    McpProbeRequest,
    McpRestartRequest,
    McpServerView,
    McpStatusAnswer,
    McpStatusRequest,
    McpUnpinRequest,
    OfferedToolView,
    Ok,
    ProbedTool,
    ServerInfoView,
    ServerStateWord,
    SourceProblemView,
    SourcesCheckRequest,
    SourcesReportView,
)
from ._admin_passkey import keep_use, verified_assertion
from ._context import Daemon
from ._mcp_sources import write_pin
from ._passkeys import PasskeyInvalid
from ._tool_sources import ToolSources, pin_record, unpin_record
from .runner._mcp_argv import mcp_probe_container_name
from .runner._mcp_call import McpProbe
from .runner._mcp_runtime import McpRuntime

log = logging.getLogger("brokerd")

MAX_REASON = 1024


class NoSuchServer(PeerError):
    """No valid source declares that server."""

    wire_code = "no_such_server"


class NoSuchProbe(PeerError):
    """The probe id is unknown, expired or used, or names another server, digest or
    `invalidates` than the probe's."""

    wire_code = "no_such_probe"


class SourcesInvalid(ConfigurationError):
    """`mcp_probe` while the source set has problems (`bxctl mcp check` lists them)."""

    wire_code = "sources_invalid"
    runbook = "docs/runbook.md#sources-invalid"


class ProbeFailed(UnavailableError):
    """The server did not start, negotiate or list for a probe, its list cannot be
    pinned, or no runtime runs MCP servers: nothing to pin."""

    wire_code = "source_unavailable"
    runbook = "docs/runbook.md#source-unavailable"


class PinNotWritten(UnavailableError):
    """The pin file could not be written durably: nothing was pinned."""

    wire_code = "audit_unavailable"
    runbook = "docs/runbook.md#audit-unavailable"


def _bounded(text: str) -> str:
    return escape_line(text)[:MAX_REASON]


def _sources(daemon: Daemon) -> ToolSources:
    sources = daemon.sources
    if sources is None:
        raise NoSuchServer("no tool sources are configured")
    return sources


async def _refreshed(daemon: Daemon) -> ToolSources:
    sources = _sources(daemon)
    _, events = await trio.to_thread.run_sync(sources.refresh)
    if events:
        await daemon.ledger.record(list(events))
    return sources


def _declared(sources: ToolSources, server: str) -> ServerDecl:
    state = sources.servers.get(server)
    if state is None:
        raise NoSuchServer(f"no valid source declares the server {server} "
                           "(bxctl mcp list shows the declared ones)")
    return state.decl


def _mcp_runtime(daemon: Daemon) -> McpRuntime | None:
    runtime = daemon.runtimes.by_kind.get("mcp")
    return runtime if isinstance(runtime, McpRuntime) else None


async def handle_mcp(body: object, peer: PeerCred, daemon: Daemon) -> AdminAnswer:
    if isinstance(body, SourcesCheckRequest):
        return _report(await _refreshed(daemon))
    if isinstance(body, McpStatusRequest):
        return _status(await _refreshed(daemon), _mcp_runtime(daemon), body.server)
    if isinstance(body, McpProbeRequest):
        answer = await _probe(body, peer, daemon)
        daemon.mcp_probes.show(answer)  # what a pin page (`_admin_mcp_link`) shows again
        return answer
    if isinstance(body, McpPinRequest):
        return await _pin(body, peer, daemon)
    if isinstance(body, McpUnpinRequest):
        return await _unpin(body, peer, daemon)
    if isinstance(body, McpRestartRequest):
        return await _restart(body, daemon)
    raise AssertionError(f"unhandled MCP request {type(body).__name__}")  # pragma: no cover


def _report(sources: ToolSources) -> SourcesReportView:
    report = sources.state.report
    return SourcesReportView(
        ok=report.ok, count=U64(report.count), digest=report.digest,
        problems=[SourceProblemView(file=p.file,
                                    index=U64(p.index) if p.index is not None else None,
                                    server=p.server, rule=p.rule, message=p.message)
                  for p in report.problems])


def _offered_views(sources: ToolSources, server: str) -> list[OfferedToolView]:
    """`server`'s offered tools as broker.sock's `tools` gives them to the model (none
    when it leaves the server out), with the kinds and egress brokerd derives."""
    decl = sources.servers[server].decl
    items, left_out = sources.tools()
    if server in left_out:
        return []
    verdicts = {v.local: v for v in sources.verdicts.get(server, {}).values()
                if v.status == "offered"}
    out: list[OfferedToolView] = []
    for item in items["items"]:
        split = split_wire_name(item["name"])
        verdict = verdicts.get(split[1]) if split is not None and split[0] == server else None
        if verdict is None:
            continue
        grammar = verdict.grammar
        egress = default_egress(decl.tool_tables.get(verdict.mcp_name),
                                has_hosts=bool(decl.hosts))
        out.append(OfferedToolView(
            name=item["name"], model_name=item["model_name"], description=item["description"],
            parameters=item["parameters"], opaque=verdict.opaque,
            kinds=dict(sorted(grammar.kinds.items())) if grammar is not None else {},
            egress=egress.word if egress.argument is None else f"arg:{egress.argument}"))
    return out


def _status(sources: ToolSources, runtime: McpRuntime | None,
            only: str | None = None) -> McpStatusAnswer:
    """Every server's state; `only` (`bxctl mcp show`): that one, with its tools."""
    if only is not None:
        _declared(sources, only)
    servers: list[McpServerView] = []
    for server in sorted(sources.servers):
        if only is not None and server != only:
            continue
        one = sources.servers[server]
        verdicts = sources.verdicts.get(server, {})
        cool = runtime.cool_downs.get(server) if runtime is not None else None
        cooling = cool is not None and runtime is not None and cool.cooling(runtime.clock())
        state: ServerStateWord = "cooling_down" if cooling and one.pin is not None else (
            "pinned" if one.pin is not None else "unpinned")
        servers.append(McpServerView(
            id=server, state=state, reason=one.unpinned,
            pin=one.pin.digest if one.pin is not None else None,
            offered=U64(sum(1 for v in verdicts.values() if v.status == "offered")),
            disabled=[DisabledTool(tool=v.mcp_name, rule=v.rule or "", message=v.message or "")
                      for _, v in sorted(verdicts.items()) if v.status == "disabled"],
            failures=U64(cool.failures if cool is not None else 0),
            tools=None if only is None else _offered_views(sources, server)))
    return McpStatusAnswer(servers=servers)


async def _probe(body: McpProbeRequest, peer: PeerCred, daemon: Daemon) -> McpProbeAnswer:
    sources = await _refreshed(daemon)
    if not sources.state.report.ok:
        raise SourcesInvalid("the source set has problems; nothing can be pinned until "
                             "they are fixed (bxctl mcp check lists them)")
    decl = _declared(sources, body.server)
    runtime = _mcp_runtime(daemon)
    if runtime is None:
        raise ProbeFailed("no runtime runs MCP servers: [runner] kind must be podman, "
                          "and podman must be usable (bxctl status)")
    probe_id = daemon.mcp_probes.new_id()
    name = mcp_probe_container_name(runtime.instance, decl.id, probe_id)
    await daemon.ledger.record([McpServerRecord(
        server=decl.id, call=None, probe_id=U64(probe_id), container=name, event="probe",
        protocol=None if decl.protocol == "auto" else decl.protocol, list_digest=None,
        reason=None, drift=None)])
    log.info("mcp_probe %d of %s by uid %d", probe_id, decl.id, peer.uid)
    found = await runtime.probe(decl, name)
    if found.egress is not None:
        await daemon.ledger.record([_probed_record(decl.id, probe_id, name, found)])
    if found.listed is None:
        raise ProbeFailed(f"the server {decl.id} could not be probed: "
                          f"{_bounded(found.problem or 'no list')}")
    listed = found.listed
    try:
        live = pin_tools(listed.tools, decl.pin_ignore)
    except UnpinnableList as exc:
        raise ProbeFailed(f"the tool list of {decl.id} cannot be pinned: "
                          f"{_bounded(exc.message)}") from exc
    current = sources.servers[decl.id].pin
    now = daemon.format_time(daemon.wall_clock())
    candidate, items = probe_tools(
        decl, protocol=listed.protocol, live=live,  # type: ignore[arg-type]
        server_info=listed.server_info, instructions=listed.instructions, current=current,
        pinned_at=now, by=peer.uid)
    lost = invalidated(daemon.watcher.state, decl.id,
                       current=sources.verdicts.get(decl.id) if current is not None else None,
                       candidate=tool_verdicts(decl, candidate))
    daemon.mcp_probes.hold(probe_id, decl.id, candidate, tuple(lost))
    info = candidate.server_info
    return McpProbeAnswer(
        probe_id=U64(probe_id), server=decl.id, protocol=candidate.protocol,
        digest=candidate.digest, pinned=current.digest if current is not None else None,
        server_info=None if info is None else ServerInfoView(name=info.name,
                                                             version=info.version),
        tools=[ProbedTool(name=item["name"], sha256=item["sha256"],
                          raw=JsonObject(item["raw"]), status=item["status"],
                          diff=[FieldDiff(field=d["field"], change=d["change"])
                                for d in item["diff"]],
                          opaque=item["opaque"], disabled=item["disabled"],
                          suggested_kinds=dict(item["suggested_kinds"]))
               for item in items],
        invalidates=[Invalidated(grant=grant, rule=rule) for grant, rule in lost])


def _probed_record(server: str, probe_id: int, name: str, found: McpProbe
                   ) -> McpServerRecord:
    """`mcp_server probed`: the end of a probe with egress, every connection of its
    containers (issue 26; written whatever the probe found, before the answer)."""
    listed = found.listed
    return McpServerRecord(
        server=server, call=None, probe_id=U64(probe_id), container=name, event="probed",
        protocol=listed.protocol if listed is not None else None, list_digest=None,
        reason=None if found.problem is None else _bounded(found.problem), drift=None,
        egress=[structure(item, EgressRecord) for item in found.egress or ()],
        egress_truncated=found.egress_truncated)


async def _pin(body: McpPinRequest, peer: PeerCred, daemon: Daemon) -> AdminAnswer:
    held = daemon.mcp_probes.take(body.probe_id)
    asked = tuple((item.grant, item.rule) for item in body.invalidates)
    if held is None or held.server != body.server or held.pin.digest != body.digest \
            or held.invalidates != asked:
        raise NoSuchProbe(f"no probe {body.probe_id} of {body.server} with that digest and "
                          "invalidates is held (a probe is good for one pin, for 10 "
                          "minutes): probe again (bxctl mcp pin)")
    sources = await _refreshed(daemon)
    state = sources.servers.get(body.server)
    if state is None or pin_source(state.decl) != held.pin.source:
        raise NoSuchProbe(f"the declaration of {body.server} changed since the probe: "
                          "probe again (bxctl mcp pin)")
    try:
        passkey = await _pin_passkey(body, peer, daemon)
    except PasskeyInvalid:
        daemon.mcp_probes.give_back(body.probe_id, held)
        raise
    pin = attrs.evolve(held.pin, pinned_at=daemon.format_time(daemon.wall_clock()),
                       by=peer.uid)
    try:
        await trio.to_thread.run_sync(write_pin, daemon.config.audit, pin)
    except OSError as exc:
        raise PinNotWritten(f"the pin file could not be written ({exc.strerror or exc}); "
                            "nothing was pinned") from exc
    prev = sources.pins.last_pinned(body.server)
    (record,) = await daemon.ledger.record([pin_record(pin, prev=prev, by=peer.uid,
                                                       passkey=passkey)])
    sources.pinned(body.server, pin.digest, record.seq)
    log.info("mcp_pin %s %s by uid %d", body.server, pin.digest, peer.uid)
    return Ok()


async def _pin_passkey(body: McpPinRequest, peer: PeerCred,
                       daemon: Daemon) -> PasskeyUse | None:
    if body.assertion is None and not daemon.config.require_passkey:
        return None
    invalidates = [{"grant": g.grant, "rule": g.rule} for g in body.invalidates]
    challenge = pin_challenge(server=body.server, probe_id=body.probe_id, digest=body.digest,
                              invalidates=invalidates)
    found = await verified_assertion(daemon, body.assertion, challenge, peer,
                                     f"pinning {body.server}")
    # What the challenge covers that the record does not, for `bxctl audit verify`.
    sidecar = pin_sidecar_bytes(server=body.server, digest=body.digest,
                                probe_id=body.probe_id, invalidates=invalidates,
                                rp_id=daemon.passkeys.rp_id or "",
                                origins=daemon.passkeys.origins)
    await keep_use(daemon, found, what="nothing was pinned", sidecar=sidecar)
    return found.use


async def _unpin(body: McpUnpinRequest, peer: PeerCred, daemon: Daemon) -> AdminAnswer:
    sources = await _refreshed(daemon)
    _declared(sources, body.server)
    reason = None if body.reason is None else _bounded(body.reason)
    (record,) = await daemon.ledger.record([unpin_record(
        body.server, prev=sources.pins.last_pinned(body.server), by=peer.uid,
        reason=reason)])
    sources.unpinned(body.server, record.seq)
    log.info("mcp_unpin %s by uid %d", body.server, peer.uid)
    return Ok()


async def _restart(body: McpRestartRequest, daemon: Daemon) -> AdminAnswer:
    sources = await _refreshed(daemon)
    _declared(sources, body.server)
    runtime = _mcp_runtime(daemon)
    if runtime is not None and runtime.restart(body.server):
        await daemon.ledger.record([McpServerRecord(
            server=body.server, call=None, probe_id=None, container=None, event="restarted",
            protocol=None, list_digest=None, reason="the owner ended the cool-down",
            drift=None)])
        log.info("mcp_restart %s: cool-down ended", body.server)
    return Ok()
