"""Where brokerd asks the policy, and the one builder of a RunSpec.

`decide`/`redecide` come from `boxmaker.policy` (the only builders of a
Decision), and their answer is brokerd's verdict as it is (`Decision | Ask`,
the one shape the call table, the audit records and the answers are made
from; issue 24 item 2).  A `RunSpec` comes from `build_run_spec` (the only
builder of one), and only from an allowed Decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..policy._commands import CommandGrant
from ..policy._decide import decide, redecide
from ..policy._decision import Ask, Decision, ProtectedPaths, ToolCall
from ..policy._mcp_verdict import NO_SOURCES, McpRegistry
from ..policy._model import GrantSet, GrantState
from ..proto._taint import Taint
from ..proto.tools import CATALOGUE
from .runner._spec import RunSpec, build_run_spec


def _no_sources() -> McpRegistry:
    return NO_SOURCES


@attrs.define
class PolicyLink:
    protected: ProtectedPaths
    registry: Callable[[], McpRegistry] = _no_sources
    """The tool registry of this moment (12-tool-sources: brokerd's `ToolSources`)."""

    @classmethod
    def of(cls, protected: Iterable[str]) -> PolicyLink:
        return cls(ProtectedPaths.of(protected))

    def decide(self, tool: str, args: dict[str, Any], taint: Taint,
               grants: GrantState) -> Decision | Ask:
        registry = self.registry() if tool.startswith("mcp.") else NO_SOURCES
        return decide(ToolCall(tool=tool, args=args), taint, grants, self.protected, registry)

    def redecide(self, asked: Ask, taint: Taint, grants: GrantState) -> Decision:
        registry = self.registry() if asked.tool.startswith("mcp.") else NO_SOURCES
        return redecide(asked, taint, grants, self.protected, registry)

    def run_spec(self, *, call_id: int, session: str, tool: str, args: dict[str, Any],
                 allow: Decision, grants: GrantState | None = None) -> RunSpec:
        """The RunSpec of an allowed Decision (TypeError for anything else)."""
        if not isinstance(allow, Decision) or not allow.allowed:
            raise TypeError("a RunSpec is built only from an allowed Decision")
        decision = allow
        label = decision.label or "public"
        untrusted = bool(decision.untrusted)
        parsed = (decision.args.as_json() if decision.args is not None
                  else decision.effective_args if decision.effective_args is not None
                  else args)
        command = _command_grant(grants, decision.grant)
        if command is not None:
            return build_run_spec(
                call_id=call_id, session=session, tool=tool, args=parsed,
                grant=decision.grant, grant_entry=decision.grant_entry,
                private_network=decision.private_network,
                label=label, untrusted=untrusted,
                deny_paths=command_deny_paths(grants, write=command.write),
                command_paths=command.paths, command_write=command.write,
            )
        if tool.startswith("mcp."):
            winner = grants.get(decision.grant) if (isinstance(grants, GrantSet)
                                                    and decision.grant is not None) else None
            table = (winner.args or {}) if winner is not None else {}
            return build_run_spec(
                call_id=call_id, session=session, tool=tool, args=parsed,
                grant=decision.grant, grant_entry=decision.grant_entry,
                private_network=decision.private_network,
                label=label, untrusted=untrusted,
                deny_paths=mcp_deny_paths(grants, tool),
                mcp_paths=tuple((name, tuple(c["paths"])) for name, c in sorted(table.items())
                                if isinstance(c.get("paths"), list)),
                mcp_private_network=tuple(name for name, c in sorted(table.items())
                                          if c.get("private_network") is True),
            )
        return build_run_spec(
            call_id=call_id, session=session, tool=tool, args=parsed,
            grant=decision.grant, grant_entry=decision.grant_entry,
            private_network=decision.private_network,
            label=label, untrusted=untrusted,
            deny_paths=deny_paths(grants, tool),
        )


def _command_grant(grants: GrantState | None, grant_id: str | None) -> CommandGrant | None:
    """The run_command part of the winning grant, when it is a run_command grant."""
    if not isinstance(grants, GrantSet) or grant_id is None:
        return None
    grant = grants.get(grant_id)
    command = None if grant is None else grant.command
    return command if isinstance(command, CommandGrant) else None


def command_deny_paths(grants: GrantState | None, *, write: bool) -> tuple[str, ...]:
    """What a run_command mount masks (12): the deny grants of the reading file
    tools, and with `write = true` those of the writing ones too."""
    if not isinstance(grants, GrantSet):
        return ()
    seen: dict[str, None] = {}
    for tool in sorted(CATALOGUE.path_tools):
        if write or not CATALOGUE[tool].writes:
            seen.update(dict.fromkeys(grants.deny_paths.get(tool, ())))
    return tuple(seen)


def mcp_deny_paths(grants: GrantState | None, tool: str) -> tuple[str, ...]:
    """What an MCP server's directory mounts mask (12 "Mounts"): every path of a `deny`
    grant of read_file, list_dir or write_file, and of a `paths` constraint of a `deny`
    grant of this tool (a subtree denied to the built-ins holds for a server too)."""
    if not isinstance(grants, GrantSet):
        return ()
    seen: dict[str, None] = {}
    for builtin in ("read_file", "list_dir", "write_file"):
        seen.update(dict.fromkeys(grants.deny_paths.get(builtin, ())))
    for grant in grants.by_tool.get(tool, ()):
        if grant.mode != "deny":
            continue
        for table in (grant.args or {}).values():
            paths = table.get("paths")
            if isinstance(paths, list):
                seen.update(dict.fromkeys(p for p in paths if isinstance(p, str)))
    return tuple(seen)


def deny_paths(grants: GrantState | None, tool: str) -> tuple[str, ...]:
    """The paths the runner masks inside a directory mount (issue 10): the `deny`
    grants of the same tool, and for write_file (a read-write mount) those of
    every file tool."""
    if not isinstance(grants, GrantSet):
        return ()
    return grants.deny_paths.get(tool, ())
