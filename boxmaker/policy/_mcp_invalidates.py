"""A probe's `invalidates` (12-tool-sources "Pinning" step 1): pure.

The grants that a new pin of a server would make dormant, or whose tool it
would disable, with the rule.  A grant is **live** under a pin when its tool
`mcp.<server>.<local>` is offered and, for an `allow`/`ask` grant, G11..G14
hold against the pinned tool.  The list names every grant of the server that
is live under the current pin and would not be under the new one: its tool
gone (`rule` null), disabled (S13, S16, S17), or the grant failing G11..G14
(its first rule).  A `deny` grant failing G11..G14 disables its tool (what it
denied stays denied): it is named with that rule whenever the tool is offered
now.  Without a current pin nothing of the server is live, so nothing is named.
Sorted by grant id.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..proto.mcp import ToolVerdict, grant_problems
from ._model import Grant, GrantSet, GrantState


def _verdict_of(verdicts: Mapping[str, ToolVerdict], local: str) -> ToolVerdict | None:
    for verdict in verdicts.values():
        if verdict.local == local:
            return verdict
    return None


def _first_rule(grant: Grant, verdict: ToolVerdict) -> str | None:
    """The first G11..G14 rule the grant fails against an offered tool, or None."""
    if verdict.grammar is None:
        return "G14"
    problems = grant_problems(verdict.grammar, mode=grant.mode,
                              when_untrusted=grant.when_untrusted, args=grant.args or {})
    return problems[0][0] if problems else None


def _live(grant: Grant, verdicts: Mapping[str, ToolVerdict], local: str) -> bool:
    verdict = _verdict_of(verdicts, local)
    if verdict is None or verdict.status != "offered":
        return False
    return grant.mode == "deny" or _first_rule(grant, verdict) is None


def invalidated(grants: GrantState, server: str, *,
                current: Mapping[str, ToolVerdict] | None,
                candidate: Mapping[str, ToolVerdict]) -> list[tuple[str, str | None]]:
    """(grant id, rule) for every grant of `server` the candidate pin would invalidate."""
    if not isinstance(grants, GrantSet) or current is None:
        return []
    prefix = f"mcp.{server}."
    out: list[tuple[str, str | None]] = []
    for grant in grants.grants:
        if not grant.tool.startswith(prefix):
            continue
        local = grant.tool[len(prefix):]
        if not _live(grant, current, local):
            continue
        verdict = _verdict_of(candidate, local)
        if verdict is None:
            out.append((grant.id, None))
        elif verdict.status != "offered":
            out.append((grant.id, verdict.rule))
        else:
            rule = _first_rule(grant, verdict)
            if rule is not None:
                out.append((grant.id, rule))
    return sorted(out)
