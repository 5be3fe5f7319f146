"""The runner seam (05-brokerd): RunSpec, RunOutcome, Runtime.

A `RunSpec` is built only here, by `build_run_spec`, from an allowed decision;
its constructor checks a private token so that a handler cannot make up its
own "allowed" (a guard against mistakes, not against hostile code).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import attrs

from ...proto._taint import Label

_TOKEN = object()

RunStatus = Literal["ok", "tool_failed", "timeout", "runner_unavailable", "unsafe_target",
                    "pin_mismatch", "source_unavailable"]


def _check_token(instance: Any, attribute: Any, value: object) -> None:
    if value is not _TOKEN:
        raise TypeError("a RunSpec is built only by boxmaker.brokerd.runner.build_run_spec")


@attrs.frozen(kw_only=True)
class RunSpec:
    """Everything a runtime needs to run one allowed call, and nothing more."""

    call_id: int
    session: str
    tool: str
    args: dict[str, Any]
    """The call's arguments, already parsed strictly by the policy (as JSON)."""
    grant: str | None
    """Id of the grant that allowed the call (None only for a test runtime)."""
    grant_entry: str | None
    """The winning grant's matching entry: its path (file tools) or host pattern."""
    private_network: bool
    label: Label
    untrusted: bool
    _token: object = attrs.field(repr=False, validator=_check_token)
    deny_paths: tuple[str, ...] = ()
    """Paths of `deny` grants the runner masks inside a directory mount (issue 10):
    the same tool's, and for write_file every file tool's."""
    command_paths: tuple[str, ...] = ()
    """run_command: every entry of the winning grant's `paths` (each is mounted)."""
    command_write: bool = False
    """run_command: the winning grant's `write` (its paths mounted read-write)."""
    mcp_paths: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """An `mcp.*` call: each `path`/`write_path` argument's entries in the winning
    grant's `paths` constraint (the longest matching one is its mount's grant entry)."""
    mcp_private_network: tuple[str, ...] = ()
    """An `mcp.*` call: the arguments whose winning constraint has `private_network`."""


def build_run_spec(
    *,
    call_id: int,
    session: str,
    tool: str,
    args: dict[str, Any],
    grant: str | None,
    grant_entry: str | None,
    private_network: bool,
    label: Label,
    untrusted: bool,
    deny_paths: tuple[str, ...] = (),
    command_paths: tuple[str, ...] = (),
    command_write: bool = False,
    mcp_paths: tuple[tuple[str, tuple[str, ...]], ...] = (),
    mcp_private_network: tuple[str, ...] = (),
) -> RunSpec:
    """The one place a RunSpec is made (called by brokerd for an allowed decision)."""
    return RunSpec(
        call_id=call_id,
        session=session,
        tool=tool,
        args=args,
        grant=grant,
        grant_entry=grant_entry,
        private_network=private_network,
        label=label,
        untrusted=untrusted,
        token=_TOKEN,
        deny_paths=deny_paths,
        command_paths=command_paths,
        command_write=command_write,
        mcp_paths=mcp_paths,
        mcp_private_network=mcp_private_network,
    )


@attrs.frozen(kw_only=True)
class RunOutcome:
    """What a runtime answers.

    `ok`/`tool_failed`/`timeout`: the tool ran (the taint rises).
    `runner_unavailable`/`unsafe_target`, and an MCP call's `pin_mismatch`/
    `source_unavailable` (12-tool-sources): nothing ran (`output` is None).
    For `tool_failed`, `output` is `{"error": {"code": ..., "message": ...}}`;
    for `timeout`, None.  `message` is for the daemon log and denial reasons.
    """

    status: RunStatus
    output: dict[str, Any] | None
    message: str | None = None
    runbook: str | None = None
    """The runbook pointer of a `runner_unavailable` answer when it is not the code's
    own `#runner-unavailable` (run_command without `[commands]`)."""
    source: dict[str, Any] | None = None
    """`result.source` of a tool source's call (12 "Audit records"); None for built-ins."""
    after_answer: Callable[[], None] | None = None
    """Work the runtime left for after the answer (a command container's removal):
    brokerd calls it once the answer is sent, or could not be (never blocks)."""


class Runtime(Protocol):
    async def run(self, spec: RunSpec) -> RunOutcome: ...

    async def aclose(self) -> None: ...
