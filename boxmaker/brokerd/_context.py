"""What every connection handler of brokerd shares: the daemon's state."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

import attrs
import trio

from .._brokerd_config import BrokerdConfig
from .._error_table import condition
from .._malloc import trim
from ..policy._load import GrantsWatcher
from ..policy._model import (
    EMPTY_DIGEST,
    GrantProblem,
    GrantsReport,
    GrantState,
    InvalidGrantSet,
)
from ..proto._convert import U64
from ..proto.audit import Event, GrantsChanged
from ..proto.wire import ts_from_unix
from ._ledger import Ledger
from ._mcp_probes import ProbeTable
from ._passkeys import PasskeyRegistry
from ._policy_link import PolicyLink
from ._tool_sources import ToolSources
from .log._checkpoints_link import CheckpointsRuntime
from .runner._mcp_runtime import McpEvent
from .runner._queue import RunQueue
from .runner._runtimes import Runtimes

log = logging.getLogger("brokerd")


def unreadable_grants(exc: OSError) -> InvalidGrantSet:
    """The grant state while the directory cannot be read: invalid, every call denied."""
    problem = GrantProblem(file=".", index=None, grant=None, rule="G1",
                           message=f"the grants directory cannot be read "
                                   f"({exc.strerror or type(exc).__name__})")
    return InvalidGrantSet(report=GrantsReport(ok=False, count=0, digest=EMPTY_DIGEST,
                                               problems=[problem]))


def grants_event(state: GrantState) -> GrantsChanged:
    report = state.report
    return GrantsChanged(ok=report.ok, count=U64(report.count), digest=report.digest,
                         problem_count=U64(len(report.problems)))


def refresh_paused(watcher: GrantsWatcher) -> tuple[GrantState, bool]:
    """`watcher.refresh()` with the cyclic GC paused: a grant load makes no reference
    cycles, and the collector's passes over the objects it makes were a tenth of a
    100,000-grant load (issue 23).  `keep_out_of_collections` follows every change, still
    paused: turned on before it, the collector would first pass over the young objects
    the load made (a fifth of a second with 100,000 grants) only for it to pass again."""
    paused = gc.isenabled()
    gc.disable()
    try:
        state, changed = watcher.refresh()
        if changed:
            keep_out_of_collections()
        return state, changed
    finally:
        if paused:
            gc.enable()


def keep_out_of_collections() -> None:
    """Leave what is alive now (the grant set above all) out of later GC passes.

    The cyclic collector's full passes walk every tracked object; with 100,000
    grants that is millions of objects on the call path (issue 23).  What is
    frozen is still freed by reference counting when a new grant set replaces it.
    """
    gc.collect()
    gc.freeze()
    trim()  # what the load freed on the C heap goes back to the system


@attrs.define(kw_only=True)
class Daemon:
    """brokerd while it serves."""

    config: BrokerdConfig
    ledger: Ledger
    watcher: GrantsWatcher
    runtimes: Runtimes
    """The runtime of each runtime kind (`[runner] kind`: refusing, echo or podman)."""
    link: PolicyLink
    version: str
    run_queue: RunQueue
    """At most max_concurrent tools run at once; max_queued more wait."""
    warnings: list[str] = attrs.field(factory=list)
    wall_clock: Callable[[], float] = time.time
    format_time: Callable[[float], str] = ts_from_unix
    stopping: bool = False
    grants_unreadable: bool = False
    checkpoints: CheckpointsRuntime | None = None
    """The `CheckpointsRuntime` (10-checkpoints), or None in tests built without it."""
    passkey_changes: trio.Lock = attrs.field(factory=trio.Lock)
    """Held from an enrolment link's check to its record: one passkey change at a time."""
    passkeys: PasskeyRegistry = attrs.field(
        factory=lambda: PasskeyRegistry(rp_id=None, origins=(), clock=trio.current_time))
    """The owner's enrolled credentials (from the log) and live enrolment links."""
    sources: ToolSources | None = None
    """The MCP tool sources and their pins (12-tool-sources); None in tests built
    without them (no server is declared)."""
    mcp_events: list[McpEvent] = attrs.field(factory=list)
    """What the MCP runtime saw during calls (drifts, cool-downs), not yet recorded."""
    mcp_probes: ProbeTable = attrs.field(factory=ProbeTable)
    """The probes held for `mcp_pin` (10 minutes, one pin each)."""

    def refresh_grants(self) -> tuple[GrantState, list[Event]]:
        """The current grant set, plus a `grants` record when it changed.

        Synchronous (no checkpoint), so the record is queued in the same
        ledger step as the decision that noticed the change.
        """
        try:
            state, changed = refresh_paused(self.watcher)
        except OSError as exc:  # the directory or a file became unreadable: deny everything
            state = unreadable_grants(exc)
            changed = not self.grants_unreadable
            self.grants_unreadable = True
            if not changed:
                return state, []
            log.warning("grants: the grants directory cannot be read (%s); every call is "
                        "denied. See %s", exc.strerror or exc, condition("grants_invalid"))
            return state, [grants_event(state)]
        if self.grants_unreadable:
            self.grants_unreadable = False
            if not changed:  # readable again, the same files: refresh_paused kept none out
                keep_out_of_collections()
            changed = True
        if not changed:
            return state, []
        report = state.report
        if state.ok:
            log.info("grants: %d grants, digest %s", report.count, report.digest)
        elif getattr(state, "missing", False):
            log.warning("grants: the grants directory is missing; every call is denied. "
                        "See %s", condition("grants_missing"))
        else:
            log.warning("grants: %d problems; every call is denied. "
                        "See %s", len(report.problems), condition("grants_invalid"))
        return state, [grants_event(state)]
