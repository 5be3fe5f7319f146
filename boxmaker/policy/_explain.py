"""What `bxctl grants explain` and `bxctl grants check` print (pure).

Every text line is escaped (07-bxctl): grant ids are of a safe grammar, but
paths, URLs, file names and messages come from files or the model.
"""

from __future__ import annotations

from typing import Any

from .._error_table import DENIAL_RUNBOOKS
from ..proto._escape import escape_line
from ..proto.mcp import SourcesReport
from ..proto.tools import CATALOGUE, RunCommandArgs
from ._commands import CommandExplanation, CommandGrant, explain_command
from ._decision import Ask, Decision
from ._model import GrantProblem, GrantSet, GrantsReport


def command_explanations(result: Decision | Ask,
                         grants: GrantSet) -> list[CommandExplanation]:
    """For a run_command call whose arguments parsed: each grant of the tool, token by
    token (`explain_command`, the same judgement as `decide`'s D3); else none."""
    parsed = result.args
    if parsed is None or not isinstance(parsed.args, RunCommandArgs):
        return []
    out: list[CommandExplanation] = []
    for grant in grants.by_tool.get(result.tool, ()):
        if result.tool in CATALOGUE.command_tools and isinstance(grant.command, CommandGrant):
            out.append(explain_command(grant.command, parsed.args.argv, parsed.args.cwd))
    return out


def explain_document(result: Decision | Ask) -> dict[str, Any]:
    """The `--json` shape of 07-bxctl."""
    if isinstance(result, Ask):
        outcome, code = "ask", None
    elif result.allowed:
        outcome, code = "allowed", None
    else:
        outcome, code = "denied", result.code
    return {
        "outcome": outcome,
        "code": code,
        "reason": result.reason,
        "grant": result.grant,
        "label": result.label,
        "untrusted": result.untrusted,
        "matched": list(result.matched),
        "applicable": list(result.applicable),
    }


def _grant_summary(grants: GrantSet | None, grant_id: str) -> str:
    grant = grants.get(grant_id) if grants is not None else None
    if grant is None:
        return grant_id
    if grant.mode == "deny":
        return f"{grant_id} (deny)"
    modes: str = grant.mode
    if grant.when_untrusted != grant.mode:
        modes += f", when_untrusted {grant.when_untrusted}"
    return f"{grant_id} ({modes}, max_label {grant.max_label})"


def explain_lines(result: Decision | Ask, grants: GrantSet | None) -> list[str]:
    """The plain-text explanation, one escaped line each (unwrapped)."""
    return [head + value for head, value in explain_rows(result, grants)]


EXPLAIN_HEAD = 12
"""Columns of a field name and its space: where explain's values start."""


def explain_rows(result: Decision | Ask, grants: GrantSet | None) -> list[tuple[str, str]]:
    """The plain-text explanation: (field name padded, escaped value) per line."""
    doc = explain_document(result)
    outcome = doc["outcome"] if doc["code"] is None else f"denied: {doc['code']}"
    state = result.state
    grant = "-"
    if result.grant is not None:
        grant = _grant_summary(grants, result.grant)
        if result.grant_entry is not None:
            grant += f", entry {result.grant_entry}"
    if result.label is None:
        taint = "-"
    else:
        taint = f"{result.label}, {'untrusted' if result.untrusted else 'trusted'}"
    matched = ", ".join(_grant_summary(grants, g) for g in result.matched) or "-"
    applicable = ", ".join(result.applicable) or "-"
    rows = [
        ("outcome", outcome),
        ("reason", result.reason),
        ("grant", grant),
        ("session", f"{state.label}, {'untrusted' if state.untrusted else 'trusted'}"),
        ("result", taint),
        ("matched", matched),
        ("applicable", applicable),
    ]
    return [(f"{name:<{EXPLAIN_HEAD - 1}} ", escape_line(value)) for name, value in rows]


def report_lines(report: GrantsReport, directory: str) -> list[str]:
    """`bxctl grants check`: one line per problem, then a summary line."""
    return check_report_lines(report, directory, noun="grant",
                              runbook=DENIAL_RUNBOOKS["grants_invalid"])


def check_report_lines(report: GrantsReport | SourcesReport, directory: str, *, noun: str,
                       runbook: str | None, counted: str | None = None,
                       denied: str = "every call") -> list[str]:
    """The lines of a `check` report (`bxctl grants check`, `bxctl mcp check`): one
    escaped line per problem, `<rule> <file> <noun> <index> (<id>): <message>`, then a
    summary line: how many `counted` (default `noun`) entries, or how many problems
    and that `denied` is denied while the set is invalid, with the `runbook` anchor."""
    lines: list[str] = []
    for problem in report.problems:
        where = problem.file
        if problem.index is not None:
            where += f" {noun} {problem.index}"
            entry = problem.grant if isinstance(problem, GrantProblem) else problem.server
            if entry is not None:
                where += f" ({entry})"
        lines.append(escape_line(f"{problem.rule} {where}: {problem.message}"))
    place = escape_line(directory)
    if report.ok:
        entries = counted or noun
        lines.append(f"ok: {report.count} {entries}{'' if report.count == 1 else 's'} in "
                     f"{place}, digest {report.digest}")
    else:
        files = len({p.file for p in report.problems})
        problems = "problem" if len(report.problems) == 1 else "problems"
        lines.append(
            f"not ok: {len(report.problems)} {problems} in {files} "
            f"file{'s' if files != 1 else ''} of {place}; {denied} is denied while the set "
            f"is invalid. See {runbook}"
        )
    return lines
