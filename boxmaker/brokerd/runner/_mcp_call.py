"""One MCP call and one probe (12 "Lifecycle", "Pinning" step 1), over a launcher: trio.

`run_mcp_call`, for each allowed call: start the server (the launcher),
negotiate in the pinned version and list, all within `start_timeout_ms`;
check the live list against the pin (`proto.mcp.drift`); write the call; wait
`call_timeout_ms` for its answer; close stdin; the launcher gives the server
2 s and removes it.  The outcome (`McpRun`) carries what `result.source`
records: the protocol, the digest of the list served, the hashes of the call
line written and the answer line read, `isError`, the exit code.

- ``ok``: a result, projected to `output_max_bytes` (`proto.mcp.project`);
- ``tool_failed``: after the call line, a JSON-RPC error (`mcp_error`),
  `input_required`, a protocol violation, a crash, an over-long answer;
- ``timeout``: no answer within `call_timeout_ms` (cancelled, then stopped);
- ``pin_mismatch``: the live list (or its version) differs from the pin; the
  call was not sent (`drift` says how);
- ``source_unavailable``: the server did not start, negotiate or list in time,
  or exited before the call line;
- ``unsafe_target`` / ``runner_unavailable``: the launcher refused before
  anything ran.

`probe_mcp_server` (only at pin time, `mcp_probe`): the era probe when the
declaration says ``auto`` (a legacy outcome starts a fresh process for
`initialize`), then the list.  Everything the server wrote besides the
answers is discarded; its stderr goes to the daemon log, escaped and bounded.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, Literal

import attrs
import trio

from ...proto.mcp import (
    CallAnswered,
    CallFailed,
    ClientProtocol,
    Drift,
    EraDecided,
    Listed,
    McpClient,
    Pin,
    ServerDecl,
    Unavailable,
    UnpinnableList,
    drift,
    pin_source,
    pin_tools,
    project,
)
from ._mcp_io import McpConnection, StderrTail
from ._mcp_launch import Launch, McpLauncher
from ._mounts import UnsafeTarget
from ._podman_argv import UNAVAILABLE
from ._podman_check import PodmanCommandError

log = logging.getLogger("brokerd")

McpStatus = Literal["ok", "tool_failed", "timeout", "pin_mismatch", "source_unavailable",
                    "unsafe_target", "runner_unavailable"]
START_FAILED: Final[McpStatus] = "source_unavailable"
"""The status of a server that did not start, negotiate or list, or exited before the
call line (it counts toward the cool-down)."""


@attrs.frozen(kw_only=True)
class McpRun:
    status: McpStatus
    output: dict[str, Any] | None
    """The projection (ok), ``{"error": {"code", "message"}}`` (tool_failed), else None."""
    message: str | None
    container: str
    protocol: str | None
    list_digest: str | None
    request_sha256: str | None
    response_sha256: str | None
    is_error: bool | None
    exit: int | None
    drift: Drift | None = None
    refused: tuple[str, ...] = ()
    egress: tuple[dict[str, Any], ...] = ()
    """Every connection the container opened or was refused (``result.source.egress``)."""
    egress_truncated: bool = False


@attrs.frozen(kw_only=True)
class McpProbe:
    """A probe's list (`listed`), or why there is none (`problem`)."""

    listed: Listed | None
    problem: str | None
    containers: tuple[str, ...]
    egress: tuple[dict[str, Any], ...] | None = None
    """With egress (a `-net-p` sidecar): every connection the probe's containers opened
    or were refused, as a call's ``result.source.egress``; None: no network."""
    egress_truncated: bool = False


def _exit_of(process: trio.Process) -> int | None:
    code = process.returncode
    return code if code is not None and 0 <= code <= 255 else None


def _failed(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"code": kind, "message": message}}


class _Run:
    """The mutable record of one call while it runs; `finish` freezes it."""

    def __init__(self, decl: ServerDecl, container: str, protocol: str | None) -> None:
        self.decl = decl
        self.container = container
        self.started = trio.current_time()
        self.protocol = protocol
        self.list_digest: str | None = None
        self.drift: Drift | None = None
        self.process: trio.Process | None = None
        self.connection: McpConnection | None = None

    def start_left_s(self) -> float:
        """What is left of `start_timeout_ms` (the container's start counts)."""
        return self.decl.start_timeout_ms / 1000 - (trio.current_time() - self.started)

    def finish(self, status: McpStatus, output: dict[str, Any] | None, message: str | None,
               *, response_sha256: str | None = None, is_error: bool | None = None) -> McpRun:
        connection = self.connection
        return McpRun(
            status=status, output=output, message=message, container=self.container,
            protocol=self.protocol, list_digest=self.list_digest,
            request_sha256=connection.client.request_sha256 if connection else None,
            response_sha256=response_sha256, is_error=is_error,
            exit=_exit_of(self.process) if self.process is not None else None,
            drift=self.drift, refused=tuple(connection.refused) if connection else ())


Finish = Callable[[_Run], McpRun]


@contextlib.asynccontextmanager
async def _connected(launcher: McpLauncher, launch: Launch, run: _Run,
                     protocol: ClientProtocol, version: str) -> AsyncIterator[McpConnection]:
    """The launched process's connection, its stderr read meanwhile and logged after."""
    stderr = StderrTail()
    async with launcher.launch(launch) as process:
        run.process = process
        assert process.stdin and process.stdout and process.stderr
        client = McpClient(protocol=protocol, version=version,
                           output_max_bytes=launch.decl.output_max_bytes)
        connection = McpConnection(client, process.stdin, process.stdout, name=launch.name)
        run.connection = connection
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stderr.read_all, process.stderr)
            try:
                yield connection
            finally:
                await connection.close_stdin()
                nursery.cancel_scope.cancel()
    if stderr.total:
        log.info("%s: stderr: %s", launch.name, stderr.shown())


async def run_mcp_call(
    launcher: McpLauncher, launch: Launch, *, pin: Pin, call_id: int, mcp_name: str,
    arguments: dict[str, Any], version: str,
) -> McpRun:
    """One allowed call of `launch.decl`'s tool `mcp_name` (see the module's docstring)."""
    run = _Run(launch.decl, launch.name, pin.protocol)
    try:
        async with _connected(launcher, launch, run, pin.protocol, version) as connection:
            finish = await _call(run, connection, pin=pin, call_id=call_id,
                                 mcp_name=mcp_name, arguments=arguments)
    except UnsafeTarget as exc:
        return run.finish("unsafe_target", None, str(exc))
    except PodmanCommandError as exc:
        return run.finish("source_unavailable", None,
                          f"the server's container did not start: {exc}")
    except OSError as exc:
        return run.finish("runner_unavailable", None,
                          f"the server could not be started ({exc.strerror or exc}). "
                          f"{UNAVAILABLE}")
    return finish(run)


async def _call(run: _Run, connection: McpConnection, *, pin: Pin, call_id: int,
                mcp_name: str, arguments: dict[str, Any]) -> Finish:
    """Negotiate, check, call; the outcome is made once the process ended (its exit)."""
    decl = run.decl
    negotiated = await connection.negotiate(start_timeout_s=run.start_left_s())
    if isinstance(negotiated, Unavailable):
        named = negotiated.named_version
        if named is not None:
            run.protocol = named
            reason = f"protocol {named} where {pin.protocol} was pinned"
            return lambda r: r.finish("pin_mismatch", None, reason)
        return lambda r: r.finish("source_unavailable", None, negotiated.reason)
    if isinstance(negotiated, EraDecided):  # our bug: a pinned version is never probed
        return lambda r: r.finish("source_unavailable", None, "an era probe at a call")
    try:
        tools = pin_tools(negotiated.tools, decl.pin_ignore)
    except UnpinnableList as exc:
        message = f"the live list cannot be pinned: {exc}"
        return lambda r: r.finish("pin_mismatch", None, message)
    changed = drift(pin, protocol=negotiated.protocol, source=pin_source(decl), tools=tools)
    if changed is not None:
        run.drift = changed
        run.list_digest = changed.live
        return lambda r: r.finish("pin_mismatch", None, changed.reason())
    run.list_digest = pin.digest
    settled = await connection.call(call_id, mcp_name, arguments,
                                    call_timeout_s=decl.call_timeout_ms / 1000)
    if isinstance(settled, CallAnswered):
        output = project(settled.result, line_bytes=settled.bytes,
                         output_max_bytes=decl.output_max_bytes)
        digest, is_error = settled.response_sha256, settled.is_error
        return lambda r: r.finish("ok", output, None, response_sha256=digest,
                                  is_error=is_error)
    if isinstance(settled, CallFailed):
        failed = settled
        return lambda r: r.finish("tool_failed", _failed(failed.kind, failed.message),
                                  failed.message, response_sha256=failed.response_sha256)
    return lambda r: r.finish("timeout", None, f"no answer within call_timeout_ms "
                                                f"({decl.call_timeout_ms} ms)")


async def probe_mcp_server(launcher: McpLauncher, decl: ServerDecl,
                           names: Callable[[], str], *, version: str,
                           network_of: str | None = None) -> McpProbe:
    """The live list of `decl`'s server for a pin (the era probe when `auto`).

    `names` gives each process's container name (a probe may need two);
    `network_of` the sidecar whose network both share (None: no network)."""
    protocol: ClientProtocol = decl.protocol
    containers: list[str] = []
    for _ in range(2):
        launch = Launch(decl=decl, name=names(), network_of=network_of)
        containers.append(launch.name)
        run = _Run(decl, launch.name, None)
        try:
            async with _connected(launcher, launch, run, protocol, version) as connection:
                negotiated = await connection.negotiate(start_timeout_s=run.start_left_s())
        except (UnsafeTarget, PodmanCommandError) as exc:
            return McpProbe(listed=None, problem=str(exc), containers=tuple(containers))
        except OSError as exc:
            return McpProbe(listed=None, problem=f"the server could not be started "
                                                 f"({exc.strerror or exc})",
                            containers=tuple(containers))
        if isinstance(negotiated, Listed):
            return McpProbe(listed=negotiated, problem=None, containers=tuple(containers))
        if isinstance(negotiated, Unavailable):
            return McpProbe(listed=None, problem=negotiated.reason,
                            containers=tuple(containers))
        protocol = "auto-legacy"  # EraDecided legacy: a fresh process for initialize
    return McpProbe(listed=None, problem="the era probe decided twice",  # our bug
                    containers=tuple(containers))
