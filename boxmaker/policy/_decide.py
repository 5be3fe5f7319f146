"""`decide` and `redecide`: 03-policy D1..D8, pure (no I/O, no clock).

The rules are applied by `judge` (`_verdict.py`); `decide` makes of its
verdict a `Decision` (allowed, or denied with a code) or an `Ask`, each with
the reason a person reads, put into words (`_reason`) when first read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .._error_table import DENIAL_RUNBOOKS, see
from ..proto._taint import Taint
from ..proto.tools import CATALOGUE, ParsedArgs, RunCommandArgs
from ._decision import (
    Allowed,
    Ask,
    CallLike,
    Decision,
    Denied,
    ProtectedPaths,
    _new,
    _new_whole,
)
from ._load import GrantsMissing
from ._mcp_verdict import NO_SOURCES, McpRegistry, judge_mcp
from ._model import GrantState, InvalidGrantSet
from ._verdict import Match, Verdict, judge


def _q(value: str) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 200 else text[:196] + '..."'


def _subject(tool: str, parsed: ParsedArgs | None) -> str:
    if parsed is None:
        return tool
    if isinstance(parsed.args, RunCommandArgs):
        shown = " ".join(_q(token) for token in parsed.args.argv[:8])
        more = " ..." if len(parsed.args.argv) > 8 else ""
        return f"{tool} [{shown}{more}] in {parsed.args.cwd}"
    if parsed.path is not None:
        return f"{tool} of {parsed.path}"
    if parsed.url is not None:
        return f"{tool} of {parsed.url.text}"
    return tool


def _taint_word(taint: Taint) -> str:
    return f"{taint.label}, {'untrusted' if taint.untrusted else 'trusted'}"


def decide(
    call: CallLike, taint: Taint, grants: GrantState, protected: ProtectedPaths,
    registry: McpRegistry = NO_SOURCES,
) -> Decision | Ask:
    """Decide one call against a grant state, a session taint and the protected paths
    (and, for `mcp.*` calls, the tool registry of this moment)."""
    tool = call.tool
    raw_args = call.args
    if tool.startswith("mcp."):
        return _decide(tool, raw_args, taint, grants, protected, registry)
    return _decision(tool, raw_args, judge(tool, raw_args, taint, grants, protected), taint,
                     grants, protected, registry, None, None)


def _invalid_reason(grants: InvalidGrantSet) -> str:
    if grants.missing:
        return (
            "the grants directory does not exist; every call is denied. "
            f"{see(GrantsMissing)}"
        )
    count = len(grants.report.problems)
    return (
        f"the grant set is invalid ({count} problem{'s' if count != 1 else ''}; "
        "bxctl grants check lists them); every call is denied. "
        f"See {DENIAL_RUNBOOKS['grants_invalid']}"
    )


def _reason(tool: str, verdict: Verdict, taint: Taint, grants: GrantState | None) -> str:
    """The verdict in words, for a person."""
    code = verdict.code
    parsed = verdict.parsed
    # D0..D2b: refused before any grant is looked at.
    if code == "grants_invalid":
        assert isinstance(grants, InvalidGrantSet)
        return _invalid_reason(grants)
    if code == "bad_args" or (verdict.detail and tool.startswith("mcp.")):
        return verdict.detail  # an mcp.* tool's own words (not offered: why)
    if code == "unknown_tool":
        return f"unknown tool {_q(tool)}; the tools are {', '.join(CATALOGUE.names)}"
    if code == "protected":
        assert parsed is not None
        return (
            f"{parsed.path} is one of boxmaker's protected paths (under {verdict.detail}); "
            "no grant can cover it"
        )
    subject = _subject(tool, parsed)
    # D7: nothing applies.
    if code == "taint":
        limits = ", ".join(
            f"{grant.id} (max_label {grant.max_label})"
            for grant in sorted((m[0] for m in verdict.matched), key=lambda g: g.id)
        )
        return (
            f"the session's label is {taint.label}; the grants that cover "
            f"{subject} apply only up to: {limits}"
        )
    if code == "no_grant":
        return f"no grant covers {subject}"
    # D5 + D6: the winner.
    winner = verdict.winner
    mode = verdict.mode
    assert winner is not None and mode is not None
    grant, winner_entry, _ = winner
    how = (
        f"mode {grant.mode}"
        if mode == grant.mode or not taint.untrusted
        else (f"when_untrusted {mode}: the session is untrusted")
    )
    entry = f", entry {winner_entry}" if winner_entry is not None else ""
    if mode == "deny":
        return f"grant {grant.id} denies {subject} ({how}{entry})"
    if mode == "ask":
        return f"grant {grant.id} asks the owner before {subject} ({how}{entry})"
    return f"grant {grant.id} allows {subject} ({how}{entry})"


def _ids(found: list[Match]) -> tuple[str, ...]:
    if not found:
        return ()
    if len(found) == 1:
        return (found[0][0].id,)
    return tuple(sorted(m[0].id for m in found))


def _reason_of(state: dict[str, Any]) -> str:
    """A decision's reason, made (and stored) on its first read."""
    reason: str | None = state.get("reason")
    if reason is None:
        reason = state["reason"] = _reason(
            state["tool"], state["_verdict"], state["state"], state.get("_grants"))
    return reason


def _words(state: dict[str, Any], name: str) -> Any:
    """The lazy fields of one decision (`_decision.Words`), from its verdict (`_verdict`;
    `_grants` only for `grants_invalid`'s words: an Ask does not keep a grant set alive)."""
    verdict: Verdict = state["_verdict"]
    if name == "reason":
        return _reason_of(state)
    if name == "matched":
        return _ids(verdict.matched)
    if name == "applicable":
        return _ids(verdict.applicable)
    if name == "args":  # typed when first read (D2's short way)
        return verdict.parsed
    if name == "outcome" and verdict.code is not None:  # an allowed one has its own
        return Denied(code=verdict.code, reason=_reason_of(state))
    raise AttributeError(name)


_ALLOWED: Final = Allowed()


def _decide(
    tool: str,
    raw_args: Mapping[str, Any],
    taint: Taint,
    grants: GrantState,
    protected: ProtectedPaths,
    registry: McpRegistry = NO_SOURCES,
) -> Decision | Ask:
    """`judge`, and the verdict's facts; its words (and typed arguments the short way
    took) wait for a reader (`_words`)."""
    if tool.startswith("mcp."):
        judged = judge_mcp(tool, raw_args, taint, grants, protected, registry)
        return _decision(tool, raw_args, judged.verdict, taint, grants, protected, registry,
                         judged.effective, judged.pin)
    return _decision(tool, raw_args, judge(tool, raw_args, taint, grants, protected), taint,
                     grants, protected, registry, None, None)


_NO_WINNER: Final[dict[str, Any]] = {
    "tool": None, "grant": None, "grant_entry": None, "private_network": False,
    "label": None, "untrusted": None, "state": None, "grants_digest": None,
    "effective_args": None, "pin": None, "_code": None, "_words": _words, "_verdict": None}
"""A decision without a winner (D0..D2b, D7): the fields every one has alike, each
decision's own set on a copy (a copy and a few stores cost half a literal of them all)."""
_WINNER: Final[dict[str, Any]] = {
    name: value for name, value in _NO_WINNER.items() if name != "_code"}
"""The same for a winner's Decision or Ask (an Ask has no `_code`)."""


def _decision(tool: str, raw_args: Mapping[str, Any], verdict: Verdict, taint: Taint,
              grants: GrantState, protected: ProtectedPaths, registry: McpRegistry,
              effective: dict[str, Any] | None, pin: str | None) -> Decision | Ask:
    """A verdict's facts as a Decision or an Ask (an `mcp.*` call's effective arguments and
    pin beside them)."""
    code = verdict.code
    winner = verdict.winner
    fields = (_NO_WINNER if winner is None else _WINNER).copy()
    fields["tool"] = tool
    fields["label"] = verdict.label
    fields["untrusted"] = verdict.untrusted
    fields["state"] = taint
    fields["grants_digest"] = grants.digest
    fields["_verdict"] = verdict
    if effective is not None or pin is not None:
        fields["effective_args"] = effective
        fields["pin"] = pin
    if verdict.short_way is None:
        fields["args"] = verdict.long_way
    if winner is None:  # D0..D2b, D7
        fields["_code"] = code
        if code == "grants_invalid":
            fields["_grants"] = grants
        return _new_whole(Decision, fields)
    grant, entry, _ = winner
    fields["grant"] = grant.id
    fields["grant_entry"] = entry
    fields["private_network"] = grant.private_network
    if verdict.mode == "ask":
        fields["raw_args"] = raw_args
        fields["protected"] = protected
        fields["sources_digest"] = registry.digest
        return _new_whole(Ask, fields)
    fields["_code"] = code
    if code is None:
        fields["outcome"] = _ALLOWED
    return _new_whole(Decision, fields)


def redecide(
    ask: Ask, taint_now: Taint, grants_now: GrantState, protected: ProtectedPaths,
    registry: McpRegistry = NO_SOURCES,
) -> Decision:
    """The owner approved `ask`: decide again now; still allow or ask runs the call.
    For an `mcp.*` call, a pin or source set other than the ask's is `changed`."""
    again = _decide(ask.tool, ask.raw_args, taint_now, grants_now, protected, registry)
    source_changed = ask.tool.startswith("mcp.") and (
        again.pin != ask.pin or registry.digest != ask.sources_digest
        or again.effective_args != ask.effective_args)
    if (isinstance(again, Ask) or again.allowed) and not source_changed:
        return _new(Decision, {
            "tool": ask.tool,
            "args": again.args,
            "outcome": _ALLOWED,
            "reason": f"approved by the owner; re-decided: {again.reason}",
            "grant": again.grant,
            "grant_entry": again.grant_entry,
            "private_network": again.private_network,
            "label": again.label,
            "untrusted": again.untrusted,
            "state": taint_now,
            "matched": again.matched,
            "applicable": again.applicable,
            "grants_digest": again.grants_digest,
            "effective_args": again.effective_args,
            "pin": again.pin,
            "_code": None,
        })
    if isinstance(again, Decision) and again.code == "grants_invalid":
        return again
    changes: list[str] = []
    if taint_now != ask.state:
        changes.append(
            f"the session's taint ({_taint_word(ask.state)} -> {_taint_word(taint_now)})"
        )
    if grants_now.digest != ask.grants_digest:
        changes.append(
            f"the grant set (digest {ask.grants_digest[:12]} -> {grants_now.digest[:12]})"
        )
    if protected != ask.protected:
        changes.append("the protected paths")
    if source_changed:
        changes.append("the tool source")
    what = " and ".join(changes) if changes else "nothing that can be named"
    reason = f"changed since the approval was asked: {what}; now: {again.reason}"
    return _new(Decision, {
        "tool": ask.tool,
        "args": again.args,
        "effective_args": again.effective_args,
        "pin": again.pin,
        "outcome": Denied(code="changed", reason=reason),
        "reason": reason,
        "grant": again.grant,
        "grant_entry": again.grant_entry,
        "private_network": again.private_network,
        "label": again.label,
        "untrusted": again.untrusted,
        "state": taint_now,
        "matched": again.matched,
        "applicable": again.applicable,
        "grants_digest": again.grants_digest,
        "_code": "changed",
    })
