"""brokerd's start-up (05-brokerd "Serving"): from the opened audit log to a Daemon.

In order: say what the audit log's opening found, rewrite stale state files
from the session taints the log rebuilt, read the grants, check the runner
settings and choose the runtime, read the passkeys from the log, open the
checkpoints.  Every weaker-than-usual setup is logged and kept in
`Daemon.warnings`, which `status` shows.  Nothing here listens: `_serve`
takes the sockets once the Daemon is built.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from .. import __version__
from .._brokerd_config import BrokerdConfig, commands_path, compute_protected
from .._error_table import condition
from .._errors import StartFailed
from .._protected import ProtectedSet
from ..policy._load import GrantsWatcher
from ..policy._model import GrantState
from ._context import Daemon, refresh_paused
from ._ledger import Ledger
from ._passkeys import PasskeyRegistry
from ._policy_link import PolicyLink
from ._state import list_sessions, read_state, sync_state_files
from ._tool_sources import ToolSources
from .log._audit_link import AuditStartup
from .log._checkpoints_link import open_checkpoints
from .runner._commands_runtime import CommandsRuntime
from .runner._echo import EchoRuntime
from .runner._mcp_launch import PodmanMcpLauncher
from .runner._mcp_oci import OciMcpLauncher
from .runner._mcp_runtime import McpEvent, McpRuntime, McpServerState
from .runner._oci import OciRuntime
from .runner._podman import PodmanRuntime
from .runner._podman_argv import PodmanSettings
from .runner._queue import RunQueue
from .runner._refusing import RefusingRuntime, UnconfiguredCommandsRuntime
from .runner._runtimes import Runtimes, ServedRuntime

log = logging.getLogger("brokerd")

SINGLE_UID_WARNING = (
    "one uid may both call tools (broker.sock) and approve them (admin.sock): a compromised "
    "loopd could approve its own calls; run loopd under a uid of its own (deploy/)"
)
FSYNC_OFF_WARNING = (
    "[audit] fsync = false: records are not flushed to disk (tests and benchmarks only)"
)


@attrs.frozen
class Prepared:
    """The daemon built at start-up, and the grant set it read first (for `start`)."""

    daemon: Daemon
    grants: GrantState
    sources_events: list[Any] = attrs.field(factory=list)
    """The first `sources` record, written after `start`."""


def podman_settings(config: BrokerdConfig) -> PodmanSettings:
    """The podman keys of [runner] as the podman runtime takes them (ValueError if bad)."""
    table = config.runner
    if table.image is None:
        raise ValueError("runner.image is not set: name the tools image by digest")
    return PodmanSettings(
        image=table.image, podman=table.podman, oci_runtime=table.oci_runtime,
        memory=table.memory, pids=table.pids, cpus=table.cpus,
        timeout_ms=table.timeout_ms, output_max_bytes=table.output_max_bytes,
        nofile=table.nofile, nproc=table.nproc, launcher=table.launcher,
    )


def runner_settings_problem(config: BrokerdConfig) -> str | None:
    """Why the podman settings are not valid (None when they are, or another runner)."""
    if config.runner.kind != "podman" or config.runner.image is None:
        return None
    try:
        podman_settings(config)
    except ValueError as exc:
        return str(exc)
    return None


async def make_runtime(config: BrokerdConfig,
                       protected: ProtectedSet | None = None,
                       events: list[McpEvent] | None = None) -> Runtimes:
    """The runtimes of `[runner] kind`, checked (podman: podman runs, the image is there,
    limits hold): one per runtime kind the configured runtime serves.

    Raises StartFailed for podman settings that are not valid.
    """
    main = await _configured_runtime(config, protected)
    if "commands" in main.serves:
        return Runtimes(main)
    mcp = await _mcp_runtime(main, events)
    # run_command: without [commands] every allowed call is runner_unavailable,
    # #commands-unconfigured; with it, the commands runtime rides on the podman runtime
    # (another kind answers runner_unavailable as for a kind it does not run).
    if config.commands is None:
        return Runtimes(main, [UnconfiguredCommandsRuntime(), *mcp])
    if isinstance(main, PodmanRuntime):  # the oci launcher is one too
        commands = CommandsRuntime(main, config.commands)
        await commands.start()
        if not commands.ok:
            log.warning("run_command unavailable: %s", commands.reason)
        return Runtimes(main, [commands, *mcp])
    return Runtimes(main, mcp)


async def _mcp_runtime(main: ServedRuntime, events: list[McpEvent] | None
                       ) -> list[ServedRuntime]:
    """The MCP runtime (12 "Lifecycle"), riding on the podman runtime: the three podman
    steps as its containers; none for another runtime (`mcp.*` calls then answer
    `runner_unavailable` in its words).  Its servers come from `ToolSources`."""
    if not isinstance(main, PodmanRuntime) or not main.ok:
        return []
    launcher = (OciMcpLauncher(main, uid=os.getuid(), gid=os.getgid())
                if isinstance(main, OciRuntime) else
                PodmanMcpLauncher(main.settings, uid=os.getuid(), gid=os.getgid(),
                                  rootless=bool(main.check_result.rootless)))
    try:
        await launcher.remove_leftovers(main.instance)
    except Exception as exc:  # noqa: BLE001 - logged; a leftover never blocks serving
        log.warning("could not remove leftover MCP containers: %s", exc)
    sink = events if events is not None else []
    return [McpRuntime(launcher, {}, instance=main.instance, version=__version__,
                       on_event=sink.append, walker=main.walker, masks=main.mask_sources,
                       call_dir=main.scratch.call_dir)]


async def _configured_runtime(config: BrokerdConfig,
                              protected: ProtectedSet | None) -> ServedRuntime:
    kind = config.runner.kind
    if kind == EchoRuntime.kind:
        return EchoRuntime()
    if kind == PodmanRuntime.kind:
        if config.runner.image is None:
            return RefusingRuntime("[runner] image is not set: name the tools image by digest")
        try:
            settings = podman_settings(config)
        except ValueError as exc:
            raise StartFailed("brokerd", f"the [runner] settings are not valid: {exc}") from exc
        if protected is None:
            protected = await trio.to_thread.run_sync(compute_protected, config)
        runtime = (PodmanRuntime if settings.launcher == "podman" else OciRuntime)(
            settings, config.home, protected=protected)
        await runtime.start()
        return runtime
    return RefusingRuntime()


def _damaged_state_warnings(config: BrokerdConfig, head: int | None,
                            rebuilt: set[str]) -> list[str]:
    """State files of sessions the log does not know, that are damaged or unreadable."""
    out = []
    for session in list_sessions(config.sessions_dir):
        if session in rebuilt:
            continue
        state = read_state(config.sessions_dir, session, head_seq=head)
        if state is not None and state.problem is not None:
            log.warning("session %s: state file %s (%s); used as secret + untrusted. "
                        "See %s",
                        session, state.problem, state.detail, condition("broker_state_damaged"))
            out.append(f"session {session}: state file {state.problem}; used as secret + untrusted")
    return out


def _audit_report_warnings(config: BrokerdConfig, startup: AuditStartup) -> list[str]:
    """What opening the log found, logged; the weaker setups returned as warnings."""
    warnings: list[str] = []
    found = startup.report
    if found is not None:
        if found.recovery is not None:
            log.warning("audit: a torn last line was closed off (recovery record %d)",
                        found.recovery.seq)
        if found.break_record is not None:
            log.warning("audit: --accept-break recorded a break (record %d) over %d failure(s)",
                        found.break_record.seq, len(found.chain.unaccepted))
        if found.unfinished_calls:
            log.info("audit: calls that were running when brokerd stopped: %s",
                     ", ".join(str(c) for c in found.unfinished_calls))
    if not config.fsync:
        log.warning(FSYNC_OFF_WARNING)
        warnings.append(FSYNC_OFF_WARNING)
    report = sync_state_files(config.sessions_dir, startup.taints, head_seq=startup.head_seq,
                              fsync=config.fsync)
    for failure in report.failed:
        log.warning("state file not rewritten: %s", failure)
    if report.rewritten:
        log.info("state files rewritten from the audit log: %s", ", ".join(report.rewritten))
    warnings += _damaged_state_warnings(config, startup.head_seq, set(startup.taints))
    return warnings


def _warn_about_grants(config: BrokerdConfig, grants: GrantState) -> None:
    if grants.ok:
        return
    if getattr(grants, "missing", False):
        log.warning("the grants directory %r does not exist; every call is denied. "
                    "See %s", os.fsdecode(config.grants), condition("grants_missing"))
    else:
        log.warning("the grant set has %d problems; every call is denied. "
                    "See %s", len(grants.report.problems), condition("grants_invalid"))


async def prepare_daemon(config: BrokerdConfig, startup: AuditStartup, *,
                         state_in_thread: bool, new_checkpoint_key: bool) -> Prepared:
    """Build the Daemon over the opened log.  Raises StartFailed for bad runner settings."""
    writer = startup.writer
    warnings = _audit_report_warnings(config, startup)
    watcher = GrantsWatcher(config.grants, commands_path=commands_path(config))
    grants, _ = refresh_paused(watcher)  # then collected once and frozen
    _warn_about_grants(config, grants)
    problem = runner_settings_problem(config)
    if problem is not None:  # before `podman info`: a bad setting fails at once
        raise StartFailed("brokerd", f"the [runner] settings are not valid: {problem}")
    protected = await trio.to_thread.run_sync(compute_protected, config)
    if protected.missing or protected.unknown:
        log.warning("protected roots missing or unknown: %s; no file tool runs. "
                    "See %s",
                    ", ".join([*protected.missing, *protected.unknown]),
                    condition("runner_unavailable"))
    link = PolicyLink.of(protected.spellings)
    ledger = Ledger(writer=writer, sessions_dir=config.sessions_dir, taints=startup.taints,
                    link=link, known_sessions=startup.known_sessions, state_fsync=config.fsync,
                    state_in_thread=state_in_thread, ttl_ms=config.ttl_ms,
                    max_pending=config.max_pending,
                    max_pending_per_session=config.max_pending_per_session)
    mcp_events: list[McpEvent] = []
    runtimes = await make_runtime(config, protected, mcp_events)
    if not runtimes.ok:
        log.warning("runner %s: %s; allowed calls answer runner_unavailable. "
                    "See %s", runtimes.kind, runtimes.reason, condition("runner_unavailable"))
    if config.single_uid:
        log.warning("%s", SINGLE_UID_WARNING)
        warnings.append(SINGLE_UID_WARNING)
    passkeys = PasskeyRegistry(rp_id=config.rp_id, origins=config.origins,
                               clock=trio.current_time)
    for record in startup.passkey_records:
        passkeys.feed(record)
    checkpoints: Any = None
    try:
        checkpoints = open_checkpoints(config, writer, new_key=new_checkpoint_key,
                                       wall_clock=time.time)
        warnings += checkpoints.warnings
    except OSError as exc:  # the tree's stored hashes cannot be kept: the log still works
        off = (f"checkpoints are off: the Merkle tree's stored hashes cannot be written "
               f"under {os.fsdecode(config.audit)} ({exc.strerror or exc}); calls are "
               "decided and recorded as ever, nothing is signed or sent to witnesses "
               "(docs/checkpoints.md)")
        log.warning("%s", off)
        warnings.append(off)
    if startup.passkeys_dropped:
        dropped = ("the passkeys enrolled before the audit log's accepted break are not "
                   f"trusted: enrol again (bxctl passkey add). See {condition('passkey_required')}")
        log.warning("%s", dropped)
        warnings.append(dropped)
    sources = ToolSources(config.sources, startup.pins, config.audit,
                          runner_output_max=config.runner.output_max_bytes)
    mcp_runtime = runtimes.by_kind.get("mcp")
    if isinstance(mcp_runtime, McpRuntime):
        runtime = mcp_runtime

        def give_states(states: Mapping[str, McpServerState]) -> None:
            runtime.servers = dict(states)
        sources.on_states = give_states
    _, sources_events = await trio.to_thread.run_sync(sources.refresh)
    link.registry = sources.registry
    run_queue = RunQueue(max_concurrent=config.max_concurrent, max_queued=config.max_queued,
                         timeout_s=config.queue_timeout_ms / 1000)
    daemon = Daemon(config=config, ledger=ledger, watcher=watcher, runtimes=runtimes,
                    link=link, version=__version__,
                    warnings=warnings, passkeys=passkeys, checkpoints=checkpoints,
                    run_queue=run_queue, sources=sources, mcp_events=mcp_events)
    return Prepared(daemon=daemon, grants=grants, sources_events=sources_events)
