"""brokerd's runtimes: one per runtime kind, typed (05-brokerd, issue 25).

A tool's catalogue entry says which runtime kind runs it (`Tool.runs_on`:
files, fetch, commands, test; `mcp` for every `mcp.<id>.<local>` tool);
`[runner] kind` (podman, refusing, echo) says how brokerd makes its runtimes.
`Runtimes` holds the runtime that serves each kind and hands a call to the one
its tool runs on.  A kind nothing serves goes to the configured runtime, which
answers it `runner_unavailable` in its own words, as it always has (the podman
runtime has no `echo`, the echo runtime runs only `echo`, the refusing runtime
runs nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

import trio

from ..._brokerd_config import RunnerKind
from ...proto.tools import CATALOGUE, RunsOn
from ._spec import RunOutcome, RunSpec


class ServedRuntime(Protocol):
    """A runtime as brokerd serves it: what it is, what it runs, whether it can."""

    @property
    def kind(self) -> RunnerKind: ...

    @property
    def serves(self) -> frozenset[RunsOn]:
        """The runtime kinds of the catalogue this runtime runs."""
        ...

    @property
    def ok(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...

    async def run(self, spec: RunSpec) -> RunOutcome: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Serving(Protocol):
    """A runtime with work of its own behind the answers (the commands runtime's
    removals): `Runtimes.serve` runs it in brokerd's background nursery."""

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None: ...


class Runtimes:
    """The runtime of each runtime kind, and the configured one (`bxctl status`)."""

    def __init__(self, main: ServedRuntime, others: Iterable[ServedRuntime] = ()) -> None:
        self.main = main
        """The `[runner] kind` runtime: what `status` shows, and the answer of a kind
        nothing serves."""
        self._all: tuple[ServedRuntime, ...] = (main, *others)
        by_kind: dict[RunsOn, ServedRuntime] = {}
        for runtime in self._all:
            for runs_on in runtime.serves:
                if runs_on in by_kind:
                    raise ValueError(f"two runtimes serve {runs_on}")
                by_kind[runs_on] = runtime
        self.by_kind: Mapping[RunsOn, ServedRuntime] = by_kind

    @property
    def kind(self) -> RunnerKind:
        return self.main.kind

    @property
    def ok(self) -> bool:
        return self.main.ok

    @property
    def reason(self) -> str | None:
        return self.main.reason

    def for_tool(self, tool: str) -> ServedRuntime:
        """The runtime that runs `tool` (the configured one when none serves its kind)."""
        if tool.startswith("mcp."):
            return self.by_kind.get("mcp", self.main)
        entry = CATALOGUE.get(tool)
        if entry is None:
            return self.main
        return self.by_kind.get(entry.runs_on, self.main)

    async def run(self, spec: RunSpec) -> RunOutcome:
        return await self.for_tool(spec.tool).run(spec)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Run each `Serving` runtime's background work until cancelled (after `aclose`)."""
        async with trio.open_nursery() as nursery:
            for runtime in self._all:
                if isinstance(runtime, Serving):
                    await nursery.start(runtime.serve)
            task_status.started()

    async def aclose(self) -> None:
        """Close every runtime once, the configured one last (a runtime's close waits
        for its work behind the answers)."""
        for runtime in reversed(self._all):
            await runtime.aclose()
