"""`decide` and `redecide`: 03-policy D1..D8, pure (no I/O, no clock).

Steps, marked in the code:

- D0 an invalid grant set denies every call (`grants_invalid`);
- D1 unknown tool; D2 arguments (strict, grammars); D2b protected paths;
- D3 matching grants; D4 applicable grants; D5 effective mode;
- D6 the winner (strictest mode, then most specific entry, then smallest id);
- D7 no applicable grant: `taint` or `no_grant`;
- D8 the result taint over all applicable matching non-deny grants.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from .._error_table import DENIAL_RUNBOOKS, see
from ..proto._args import FILE_TOOLS, TOOLS, ArgsError, ParsedArgs, parse_args
from ..proto._grammar import Url
from ..proto._taint import Label, Taint, label_rank, max_label
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
from ._model import STRICTNESS, Grant, GrantSet, GrantState, HostPattern, InvalidGrantSet


@attrs.frozen(kw_only=True)
class _Match:
    grant: Grant
    entry: str | None
    specificity: tuple[int, ...]


def _q(value: str) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 200 else text[:196] + '..."'


def _subject(tool: str, parsed: ParsedArgs) -> str:
    if parsed.path is not None:
        return f"{tool} of {parsed.path}"
    if parsed.url is not None:
        return f"{tool} of {parsed.url.text}"
    return tool


def _covers_port(grant: Grant, pattern: HostPattern, url: Url) -> bool:
    """Scheme and port coverage of a host pattern (03-policy "Host patterns")."""
    port = url.effective_port
    if grant.mode == "deny":
        return pattern.port is None or pattern.port == port
    if url.scheme == "http" and not grant.http:
        return False
    if pattern.port is None:
        return port == (443 if url.scheme == "https" else 80)
    return port == pattern.port


def _matches(tool: str, parsed: ParsedArgs, grants: GrantSet) -> list[_Match]:
    """D3: every grant of the tool that covers the request, with its best entry."""
    best: dict[str, _Match] = {}

    def offer(grant: Grant, entry: str | None, specificity: tuple[int, ...]) -> None:
        current = best.get(grant.id)
        if current is None or specificity > current.specificity:
            best[grant.id] = _Match(grant=grant, entry=entry, specificity=specificity)

    if tool in FILE_TOOLS:
        path = parsed.path
        assert path is not None
        # A grant path can only be a prefix that ends at a component boundary and has
        # the length of some grant path of this tool: look up only those prefixes.
        lengths = grants.path_lengths.get(tool, ())
        size = len(path)
        if len(lengths) <= path.count("/"):
            cuts = [n for n in lengths if n == size or (n < size and path[n] == "/")]
        else:
            wanted = frozenset(lengths)
            cuts = [size] if size in wanted else []
            at = path.find("/", 1)
            while at != -1:
                if at in wanted:
                    cuts.append(at)
                at = path.find("/", at + 1)
        for cut in cuts:
            for grant, entry in grants.by_path.get((tool, path[:cut]), ()):
                offer(grant, entry, (len(entry),))
    elif tool == "http_fetch":
        url = parsed.url
        assert url is not None
        host = url.host
        candidates = list(grants.by_host.get((False, host), ()))
        at = host.find(".")
        while at != -1:
            candidates.extend(grants.by_host.get((True, host[at + 1 :]), ()))
            at = host.find(".", at + 1)
        for grant, pattern in candidates:
            if _covers_port(grant, pattern, url):
                offer(grant, pattern.text, pattern.specificity)
    else:  # echo: a grant covers every echo call
        for grant in grants.by_tool.get(tool, ()):
            offer(grant, None, ())
    return list(best.values())


def _applies(grant: Grant, taint: Taint) -> bool:
    """D4: a deny grant always applies; allow/ask up to its max_label."""
    return grant.mode == "deny" or label_rank(taint.label) <= label_rank(grant.max_label)


def _effective_mode(grant: Grant, taint: Taint) -> str:
    """D5."""
    return grant.when_untrusted if taint.untrusted else grant.mode


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
    digest = grants.digest

    def deny(parsed: ParsedArgs | None, code: DenialCode, reason: str, **extra: Any) -> Decision:
        return _denied(tool, parsed, code, reason, taint=taint, digest=digest, **extra)

    # D0: no valid grant set, no call.
    if isinstance(grants, InvalidGrantSet):
        return deny(None, "grants_invalid", _invalid_reason(grants))
    # D1: unknown tool; the arguments are not parsed.
    if tool not in TOOLS:
        return deny(
            None, "unknown_tool", f"unknown tool {_q(tool)}; the tools are {', '.join(TOOLS)}"
        )
    # D2: strict arguments and grammars.
    try:
        parsed = parse_args(tool, raw_args)
    except ArgsError as exc:
        return deny(None, "bad_args", str(exc))
    # D2b: boxmaker's own paths, whatever the grants say.
    if parsed.path is not None:
        base = protected.covering(parsed.path)
        if base is not None:
            return deny(
                parsed,
                "protected",
                f"{parsed.path} is one of boxmaker's protected paths (under {base}); "
                "no grant can cover it",
            )
    subject = _subject(tool, parsed)
    # D3: matching grants.
    matched = _matches(tool, parsed, grants)
    matched_ids = tuple(sorted(m.grant.id for m in matched))
    # D4: applicable grants.
    applicable = [m for m in matched if _applies(m.grant, taint)]
    applicable_ids = tuple(sorted(m.grant.id for m in applicable))
    # D8 (computed here, reported with every outcome): the result taint.
    label: Label | None = None
    untrusted: bool | None = None
    for m in applicable:
        if m.grant.mode != "deny":
            label = m.grant.label if label is None else max_label(label, m.grant.label)
            untrusted = bool(untrusted) or m.grant.untrusted
    lists = {
        "matched": matched_ids,
        "applicable": applicable_ids,
        "label": label,
        "untrusted": untrusted,
    }
    # D7: nothing applies.
    if not applicable:
        if matched:
            limits = ", ".join(
                f"{m.grant.id} (max_label {m.grant.max_label})"
                for m in sorted(matched, key=lambda m: m.grant.id)
            )
            return deny(
                parsed,
                "taint",
                f"the session's label is {taint.label}; the grants that cover "
                f"{subject} apply only up to: {limits}",
                **lists,
            )
        return deny(parsed, "no_grant", f"no grant covers {subject}", **lists)

    # D5 + D6: the strictest effective mode, then the most specific entry, then the smallest id.
    def rank(m: _Match) -> tuple[int, tuple[int, ...]]:
        return (STRICTNESS[_effective_mode(m.grant, taint)], m.specificity)

    top = max(rank(m) for m in applicable)
    winner = min((m for m in applicable if rank(m) == top), key=lambda m: m.grant.id)
    grant = winner.grant
    mode = _effective_mode(grant, taint)
    how = (
        f"mode {grant.mode}"
        if mode == grant.mode or not taint.untrusted
        else (f"when_untrusted {mode}: the session is untrusted")
    )
    entry = f", entry {winner.entry}" if winner.entry is not None else ""
    win = {"grant": grant.id, "grant_entry": winner.entry, "private_network": grant.private_network}
    if mode == "deny":
        return deny(
            parsed,
            "denied_by_grant",
            f"grant {grant.id} denies {subject} ({how}{entry})",
            **lists,
            **win,
        )
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
