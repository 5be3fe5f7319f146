"""`decide` and `redecide`: 03-policy D1..D8, pure (no I/O, no clock).

The rules are applied by `judge` (`_verdict.py`); `decide` puts its verdict
into words: a `Decision` (allowed, or denied with a code) or an `Ask`, each
with the reason a person reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._error_table import DENIAL_RUNBOOKS, see
from ..proto._taint import Taint
from ..proto.tools import CATALOGUE, ParsedArgs, RunCommandArgs
from ._decision import (
    Allowed,
    Ask,
    CallLike,
    Decision,
    DenialCode,
    Denied,
    ProtectedPaths,
    _build,
)
from ._load import GrantsMissing
from ._model import GrantState, InvalidGrantSet
from ._verdict import judge


def _q(value: str) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 200 else text[:196] + '..."'


def _subject(tool: str, parsed: ParsedArgs) -> str:
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
    call: CallLike, taint: Taint, grants: GrantState, protected: ProtectedPaths
) -> Decision | Ask:
    """Decide one call against a grant state, a session taint and the protected paths."""
    return _decide(call.tool, call.args, taint, grants, protected)


def _denied(
    tool: str,
    parsed: ParsedArgs | None,
    code: DenialCode,
    reason: str,
    *,
    taint: Taint,
    digest: str,
    **extra: Any,
) -> Decision:
    fields: dict[str, Any] = {
        "grant": None,
        "grant_entry": None,
        "private_network": False,
        "label": None,
        "untrusted": None,
        "matched": (),
        "applicable": (),
    }
    fields.update(extra)
    return _build(
        Decision,
        tool=tool,
        args=parsed,
        outcome=Denied(code=code, reason=reason),
        reason=reason,
        state=taint,
        grants_digest=digest,
        **fields,
    )


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


def _decide(
    tool: str,
    raw_args: Mapping[str, Any],
    taint: Taint,
    grants: GrantState,
    protected: ProtectedPaths,
) -> Decision | Ask:
    """`judge`, and the verdict in words."""
    digest = grants.digest
    verdict = judge(tool, raw_args, taint, grants, protected)
    code = verdict.code
    parsed = verdict.parsed

    def deny(reason: str, **extra: Any) -> Decision:
        assert code is not None
        return _denied(tool, parsed, code, reason, taint=taint, digest=digest, **extra)

    # D0..D2b: refused before any grant is looked at.
    if code == "grants_invalid":
        assert isinstance(grants, InvalidGrantSet)
        return deny(_invalid_reason(grants))
    if code == "unknown_tool":
        return deny(f"unknown tool {_q(tool)}; the tools are {', '.join(CATALOGUE.names)}")
    if code == "bad_args":
        return deny(verdict.detail)
    assert parsed is not None
    if code == "protected":
        return deny(
            f"{parsed.path} is one of boxmaker's protected paths (under {verdict.detail}); "
            "no grant can cover it"
        )
    subject = _subject(tool, parsed)
    lists = {
        "matched": verdict.matched_ids,
        "applicable": verdict.applicable_ids,
        "label": verdict.label,
        "untrusted": verdict.untrusted,
    }
    # D7: nothing applies.
    if code == "taint":
        limits = ", ".join(
            f"{grant.id} (max_label {grant.max_label})"
            for grant in sorted((m[0] for m in verdict.matched), key=lambda g: g.id)
        )
        return deny(
            f"the session's label is {taint.label}; the grants that cover "
            f"{subject} apply only up to: {limits}",
            **lists,
        )
    if code == "no_grant":
        return deny(f"no grant covers {subject}", **lists)
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
    win = {"grant": grant.id, "grant_entry": winner_entry, "private_network": grant.private_network}
    if mode == "deny":
        return deny(f"grant {grant.id} denies {subject} ({how}{entry})", **lists, **win)
    if mode == "ask":
        return _build(
            Ask,
            tool=tool,
            raw_args=raw_args,
            args=parsed,
            reason=f"grant {grant.id} asks the owner before {subject} ({how}{entry})",
            state=taint,
            grants_digest=digest,
            protected=protected,
            **lists,
            **win,
        )
    return _build(
        Decision,
        tool=tool,
        args=parsed,
        outcome=Allowed(),
        reason=f"grant {grant.id} allows {subject} ({how}{entry})",
        state=taint,
        grants_digest=digest,
        **lists,
        **win,
    )


def redecide(
    ask: Ask, taint_now: Taint, grants_now: GrantState, protected: ProtectedPaths
) -> Decision:
    """The owner approved `ask`: decide again now; still allow or ask runs the call."""
    again = _decide(ask.tool, ask.raw_args, taint_now, grants_now, protected)
    if isinstance(again, Ask) or again.allowed:
        return _build(
            Decision,
            tool=ask.tool,
            args=again.args,
            outcome=Allowed(),
            reason=f"approved by the owner; re-decided: {again.reason}",
            grant=again.grant,
            grant_entry=again.grant_entry,
            private_network=again.private_network,
            label=again.label,
            untrusted=again.untrusted,
            state=taint_now,
            matched=again.matched,
            applicable=again.applicable,
            grants_digest=again.grants_digest,
        )
    if again.code == "grants_invalid":
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
    what = " and ".join(changes) if changes else "nothing that can be named"
    reason = f"changed since the approval was asked: {what}; now: {again.reason}"
    return _denied(
        ask.tool,
        again.args,
        "changed",
        reason,
        taint=taint_now,
        digest=again.grants_digest,
        grant=again.grant,
        grant_entry=again.grant_entry,
        private_network=again.private_network,
        label=again.label,
        untrusted=again.untrusted,
        matched=again.matched,
        applicable=again.applicable,
    )
