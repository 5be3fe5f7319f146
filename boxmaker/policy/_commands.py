"""`run_command` grants as values, D3 matching and D6 (12-tool-sources "Grants"): pure.

A `CommandGrant` is the run_command part of one valid grant: its mode, its
`paths`, `write`, the `commands` prefixes (each token a tuple of alternative
strings) and `rest`.  The generic fields (label, untrusted, max_label,
when_untrusted, note) stay with the grant; `decide` applies D4, D5 and D8 to
them as for every tool.

Matching (D3), marked in the code:

1. `cwd` equals an entry of `paths` or lies below it, component-wise (a deny
   grant without `paths` matches every `cwd`); the longest such entry is the
   grant's entry;
2. a prefix no longer than argv whose every token equals the argv token at
   its place, byte for byte (a list token: one of its strings).  Literal: no
   basename fallback, so ``/tmp/git`` is not ``git``;
3. allow/ask: the tokens after the prefix satisfy `rest` (``none``,
   ``no_options``, ``paths``, ``any``); deny: whatever follows;
4. (D2b) the caller checks `cwd` and, for ``rest = "paths"``, every joined
   path token (`CommandMatch.path_tokens`) against the protected paths.

D6: the strictest effective mode, then the matching prefix with the most
tokens, then the longest `paths` entry matching `cwd`, then the smallest id
(`CommandMatch.specificity` is the middle two, as `judge` compares it).

`explain_command` gives the same judgement token by token for `bxctl grants
explain`; a test holds it equal to `match_command`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal

import attrs

from ..proto._escape import escape_line
from ..proto._grammar import is_below, path_problem
from ._decision import ProtectedPaths
from ._model import STRICTNESS, Mode

Rest = Literal["none", "no_options", "paths", "any"]
RESTS: Final[tuple[Rest, ...]] = ("none", "no_options", "paths", "any")

Token = tuple[str, ...]
"""One prefix token: its alternatives (a plain string is one alternative)."""
Prefix = tuple[Token, ...]


@attrs.frozen(kw_only=True)
class CommandGrant:
    """The run_command part of one valid grant (every default applied)."""

    id: str
    mode: Mode
    paths: tuple[str, ...]
    """Mounted; `cwd` lies at or below one.  Empty only for a deny grant (every cwd)."""
    write: bool
    commands: tuple[Prefix, ...]
    rest: Rest


@attrs.frozen(kw_only=True)
class CommandMatch:
    """A grant that matches a call (D3), with what D6 and the mounts need."""

    grant: CommandGrant
    prefix: int
    """The index in `commands` of the matching prefix with the most tokens."""
    tokens: int
    """That prefix's length."""
    entry: str | None
    """The longest `paths` entry `cwd` is at or below (None: a deny grant without paths)."""
    path_tokens: tuple[str, ...] = ()
    """``rest = "paths"``: each token after the prefix as an absolute path (D2b)."""

    @property
    def specificity(self) -> tuple[int, int]:
        """D6 after the mode: more prefix tokens, then a longer entry."""
        return (self.tokens, 0 if self.entry is None else len(self.entry))


def cwd_entry(paths: Sequence[str], cwd: str) -> str | None:
    """The longest entry of `paths` that `cwd` equals or lies below, or None."""
    best: str | None = None
    for entry in paths:
        if is_below(cwd, entry) and (best is None or len(entry) > len(best)):
            best = entry
    return best


def prefix_equal(prefix: Prefix, argv: Sequence[str]) -> bool:
    """D3 step 2: `prefix` is no longer than argv and each token equals argv's there."""
    if len(prefix) > len(argv):
        return False
    return all(argv[at] in token for at, token in enumerate(prefix))


def join_path(cwd: str, token: str) -> str:
    """A `rest = "paths"` token as an absolute path: itself, or ``cwd + "/" + token``."""
    return token if token.startswith("/") else cwd + "/" + token


def rest_problem(
    rest: Rest, tokens: Sequence[str], cwd: str, paths: Sequence[str]
) -> tuple[str | None, tuple[str, ...]]:
    """D3 step 3: why `tokens` (after the prefix) break `rest`, or None; and, for
    ``paths``, the joined paths."""
    if rest == "any" or (rest == "none" and not tokens):
        return None, ()
    if rest == "none":
        return f"rest none: {len(tokens)} token(s) follow the prefix", ()
    joined: list[str] = []
    for at, token in enumerate(tokens):
        if token.startswith("-"):
            return f"rest {rest}: token {at} after the prefix starts with -", ()
        if rest == "paths":
            path = join_path(cwd, token)
            problem = path_problem(path)
            if problem is not None:
                return f"rest paths: token {at} after the prefix: {problem}", ()
            if cwd_entry(paths, path) is None:
                return (
                    f"rest paths: token {at} after the prefix is not at or below "
                    "an entry of paths",
                    (),
                )
            joined.append(path)
    return None, tuple(joined)


def match_command(grant: CommandGrant, argv: Sequence[str], cwd: str) -> CommandMatch | None:
    """D3 for one grant: the match, or None."""
    # 1. cwd at or below an entry (a deny grant without paths: every cwd).
    entry = cwd_entry(grant.paths, cwd)
    if entry is None and grant.paths:
        return None
    best: CommandMatch | None = None
    for index, prefix in enumerate(grant.commands):
        # 2. the literal prefix; the longest one wins within the grant.
        if (best is not None and len(prefix) <= best.tokens) or not prefix_equal(prefix, argv):
            continue
        # 3. what follows (deny: anything).
        joined: tuple[str, ...] = ()
        if grant.mode != "deny":
            problem, joined = rest_problem(grant.rest, argv[len(prefix) :], cwd, grant.paths)
            if problem is not None:
                continue
        best = CommandMatch(
            grant=grant, prefix=index, tokens=len(prefix), entry=entry, path_tokens=joined
        )
    return best


def command_matches(
    grants: Iterable[CommandGrant], argv: Sequence[str], cwd: str
) -> list[CommandMatch]:
    """D3: every matching grant, in the order given."""
    out: list[CommandMatch] = []
    for grant in grants:
        found = match_command(grant, argv, cwd)
        if found is not None:
            out.append(found)
    return out


def command_winner(
    matches: Iterable[CommandMatch], effective: Callable[[CommandGrant], Mode]
) -> CommandMatch | None:
    """D6: the strictest effective mode, then `specificity`, then the smallest id.

    `effective` is D5's mode of a grant (`when_untrusted` in an untrusted session)."""
    winner: CommandMatch | None = None
    top: tuple[int, tuple[int, int]] = (-1, (0, 0))
    for found in matches:
        key = (STRICTNESS[effective(found.grant)], found.specificity)
        if (
            winner is None
            or key > top
            or (key == top and found.grant.id < winner.grant.id)
        ):
            winner, top = found, key
    return winner


def command_protected(
    cwd: str, matches: Iterable[CommandMatch], protected: ProtectedPaths
) -> tuple[str, str] | None:
    """D2b for run_command: ``(path, protected base)`` for `cwd`, or else the first
    joined ``rest = "paths"`` token of any matching grant, under a protected path;
    None when none is.  (Such a call is denied `protected`, whichever grant wins.)"""
    base = protected.covering(cwd)
    if base is not None:
        return cwd, base
    for found in matches:
        for path in found.path_tokens:
            base = protected.covering(path)
            if base is not None:
                return path, base
    return None


# -- explain ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TokenCheck:
    """One prefix token against the argv token at its place."""

    position: int
    want: Token
    got: str | None
    """None when argv is shorter than the prefix."""
    equal: bool


@attrs.frozen(kw_only=True)
class PrefixCheck:
    index: int
    tokens: tuple[TokenCheck, ...]
    equal: bool
    """Every token equal (and the prefix no longer than argv)."""
    rest_problem: str | None
    """Why what follows breaks `rest` (only when `equal` and not a deny grant)."""

    @property
    def matched(self) -> bool:
        return self.equal and self.rest_problem is None


@attrs.frozen(kw_only=True)
class CommandExplanation:
    """`bxctl grants explain --tool run_command` for one grant, token by token."""

    grant: str
    mode: Mode
    rest: Rest
    cwd: str
    entry: str | None
    cwd_ok: bool
    prefixes: tuple[PrefixCheck, ...]
    match: CommandMatch | None

    def as_json(self) -> dict[str, Any]:
        return {
            "grant": self.grant,
            "mode": self.mode,
            "rest": self.rest,
            "cwd": {"path": self.cwd, "entry": self.entry, "ok": self.cwd_ok},
            "prefixes": [
                {
                    "index": p.index,
                    "tokens": [
                        {"position": t.position, "want": list(t.want), "got": t.got,
                         "equal": t.equal}
                        for t in p.tokens
                    ],
                    "equal": p.equal,
                    "rest_problem": p.rest_problem,
                    "matched": p.matched,
                }
                for p in self.prefixes
            ],
            "matched": self.match is not None,
            "prefix": None if self.match is None else self.match.prefix,
        }

    def lines(self) -> list[str]:
        """One line each; every value from a file or the model escaped (indents are ours)."""
        e = escape_line
        out = [f"grant {e(self.grant)} ({self.mode}, rest {self.rest})"]
        if self.cwd_ok:
            where = "every cwd (no paths)" if self.entry is None else f"entry {e(self.entry)}"
            out.append(f"  cwd {e(self.cwd)}: at or below {where}")
        else:
            out.append(f"  cwd {e(self.cwd)}: below no entry of paths")
        def q(token: str) -> str:  # quoted, so that "" and "a " are visible
            return e(json.dumps(token, ensure_ascii=False))

        for p in self.prefixes:
            out.append(f"  prefix {p.index}: {'matches' if p.matched else 'does not match'}")
            for t in p.tokens:
                want = " | ".join(q(w) for w in t.want)
                got = "(argv ends)" if t.got is None else q(t.got)
                mark = "=" if t.equal else "!="
                out.append(f"    [{t.position}] {got} {mark} {want}")
            if p.rest_problem is not None:
                out.append(f"    {e(p.rest_problem)}")
        verdict = "matches" if self.match is not None else "does not match"
        out.append(f"  the grant {verdict}")
        return out


def explain_command(grant: CommandGrant, argv: Sequence[str], cwd: str) -> CommandExplanation:
    """D3 for one grant with every comparison shown."""
    entry = cwd_entry(grant.paths, cwd)
    cwd_ok = entry is not None or not grant.paths
    checks: list[PrefixCheck] = []
    for index, prefix in enumerate(grant.commands):
        tokens = tuple(
            TokenCheck(
                position=at,
                want=token,
                got=argv[at] if at < len(argv) else None,
                equal=at < len(argv) and argv[at] in token,
            )
            for at, token in enumerate(prefix)
        )
        equal = all(t.equal for t in tokens)
        problem: str | None = None
        if equal and grant.mode != "deny":
            problem, _ = rest_problem(grant.rest, argv[len(prefix) :], cwd, grant.paths)
        checks.append(PrefixCheck(index=index, tokens=tokens, equal=equal, rest_problem=problem))
    found = match_command(grant, argv, cwd) if cwd_ok else None
    return CommandExplanation(
        grant=grant.id,
        mode=grant.mode,
        rest=grant.rest,
        cwd=cwd,
        entry=entry,
        cwd_ok=cwd_ok,
        prefixes=tuple(checks),
        match=found,
    )
