"""The one place where brokerd turns the policy's answers into its own terms.

`decide`/`redecide` come from `boxmaker.policy` (the only builders of a
Decision); a `RunSpec` comes from `build_run_spec` (the only builder of one),
and only from an allowed Decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ..policy._decide import decide, redecide
from ..policy._decision import Ask, Decision, ProtectedPaths, ToolCall
from ..policy._model import GrantSet, GrantState
from ..proto._args import FILE_TOOLS
from ..proto._taint import Taint
from ._ledger import Ruling
from .runner._spec import RunSpec, build_run_spec


def ruling_of(result: Decision | Ask) -> Ruling:
    if isinstance(result, Ask):
        return Ruling(kind="ask", reason=result.reason, grant=result.grant,
                      label=result.label or "public", untrusted=bool(result.untrusted),
                      ask=result)
    if result.allowed:
        return Ruling(kind="allowed", reason=result.reason, grant=result.grant,
                      label=result.label or "public", untrusted=bool(result.untrusted),
                      decision=result)
    return Ruling(kind="denied", code=result.code, reason=result.reason, grant=result.grant)


@attrs.define
class PolicyLink:
    protected: ProtectedPaths

    @classmethod
    def of(cls, protected: Iterable[str]) -> PolicyLink:
        return cls(ProtectedPaths.of(protected))

    def decide(self, tool: str, args: dict[str, Any], taint: Taint,
               grants: GrantState) -> Ruling:
        return ruling_of(decide(ToolCall(tool=tool, args=args), taint, grants, self.protected))

    def redecide(self, ask: Any, taint: Taint, grants: GrantState) -> Ruling:
        if not isinstance(ask, Ask):  # pragma: no cover - our own bug
            raise TypeError("redecide needs the policy's Ask")
        return ruling_of(redecide(ask, taint, grants, self.protected))

    def run_spec(self, *, call_id: int, session: str, tool: str, args: dict[str, Any],
                 ruling: Ruling, grants: GrantState | None = None) -> RunSpec:
        decision = ruling.decision
        if not isinstance(decision, Decision) or not decision.allowed:  # pragma: no cover
            raise TypeError("a RunSpec is built only from an allowed Decision")
        parsed = decision.args.as_json() if decision.args is not None else args
        return build_run_spec(
            call_id=call_id, session=session, tool=tool, args=parsed,
            grant=decision.grant, grant_entry=decision.grant_entry,
            private_network=decision.private_network,
            label=decision.label or "public", untrusted=bool(decision.untrusted),
            deny_paths=deny_paths(grants, tool),
        )


def deny_paths(grants: GrantState | None, tool: str) -> tuple[str, ...]:
    """The paths the runner masks inside a directory mount (issue 10): the `deny`
    grants of the same tool, and for write_file (a read-write mount) those of
    every file tool."""
    if not isinstance(grants, GrantSet) or tool not in FILE_TOOLS:
        return ()
    tools = FILE_TOOLS if tool == "write_file" else (tool,)
    out: list[str] = []
    for grant in grants.grants:
        if grant.mode == "deny" and grant.tool in tools:
            out += [p for p in grant.paths if p not in out]
    return tuple(out)
