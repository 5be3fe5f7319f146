"""Drafting `run_command` grants from calls (`bxctl grants suggest`): pure.

`suggest_commands(calls)` proposes, for calls of ``(argv, cwd)``, the
narrowest prefixes that cover them:

- a program that runs other programs (a shell, an exec wrapper, an
  interpreter: G20's list) is proposed as its whole argv, exact, with
  ``rest = "none"``, never with more: such a prefix with anything after it
  allows any program;
- any other program: ``[argv[0]]``, plus ``argv[1]`` when it is a plain word
  (a subcommand such as ``status``: no ``-``, ``/`` or ``=``); calls of the
  same program, cwd and shape share one prefix, their subcommands as
  alternatives; `rest` is the narrowest of ``none``, ``no_options``,
  ``paths``, ``any`` that every call satisfies;
- `paths` is the calls' `cwd` itself, `write` false.

Each suggestion lists the calls' argvs as `match` examples (at most
`MAX_EXAMPLES`), so G19 re-checks the draft when it is loaded.  A test holds
that every suggestion matches each of its calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from ._command_grants import runs_any_program
from ._commands import CommandGrant, Prefix, Rest, rest_problem
from ._suggest_toml import toml_string

MAX_EXAMPLES: Final = 4
"""`match` examples written per suggestion."""
MAX_SUGGESTIONS: Final = 1000
_WORD: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


@attrs.frozen(kw_only=True)
class CommandSuggestion:
    """One proposed run_command grant (its run_command fields)."""

    prefix: Prefix
    rest: Rest
    paths: tuple[str, ...]
    examples: tuple[tuple[str, ...], ...]
    """The calls it was made from (each matches it)."""
    calls: int
    """How many calls it covers."""

    def grant(self, grant_id: str, mode: str = "ask") -> CommandGrant:
        """As a grant value (for checking the draft)."""
        assert mode in ("allow", "ask")
        return CommandGrant(
            id=grant_id, mode="ask" if mode == "ask" else "allow", paths=self.paths,
            write=False, commands=(self.prefix,), rest=self.rest,
        )

    def toml_lines(self) -> list[str]:
        """`paths`, `write`, `commands`, `rest`, `match` as TOML lines."""
        return ["paths = [" + ", ".join(toml_string(p) for p in self.paths) + "]",
                *self.field_lines()]

    def field_lines(self) -> list[str]:
        """`write`, `commands`, `rest`, `match` (what follows `paths`)."""
        return [
            *command_field_lines(False, (self.prefix,), self.rest),
            "match = [" + ", ".join(_argv(e) for e in self.examples) + "]",
        ]

    def words(self) -> str:
        """The prefix for a person: alternatives in brackets (escaped by the caller)."""
        return " ".join(t[0] if len(t) == 1 else "[" + "|".join(t) + "]" for t in self.prefix)


def _token(alternatives: tuple[str, ...]) -> str:
    if len(alternatives) == 1:
        return toml_string(alternatives[0])
    return "[" + ", ".join(toml_string(a) for a in alternatives) + "]"


def _argv(tokens: Sequence[str]) -> str:
    return "[" + ", ".join(toml_string(t) for t in tokens) + "]"


def command_field_lines(write: bool, commands: Sequence[Prefix], rest: Rest) -> list[str]:
    """`write`, `commands`, `rest` of a run_command grant as TOML lines."""
    listed = ", ".join("[" + ", ".join(_token(t) for t in prefix) + "]" for prefix in commands)
    return [f"write = {'true' if write else 'false'}", f"commands = [{listed}]",
            f"rest = {toml_string(rest)}"]


def allow_is_valid(grant: CommandGrant) -> bool:
    """Whether the grant may be `allow` (G20): no shell, exec wrapper or interpreter
    in any first-token alternative, unless `rest = "none"`."""
    return grant.rest == "none" or not any(
        runs_any_program(first) for prefix in grant.commands for first in prefix[0])


NARROW: Final[tuple[Rest, ...]] = ("none", "paths", "no_options", "any")
"""The `rest` words from narrowest to widest: each allows all that the one before does."""


def _narrowest_rest(tokens: Sequence[str], cwd: str) -> int:
    for at, rest in enumerate(NARROW):
        if rest_problem(rest, tokens, cwd, (cwd,))[0] is None:
            return at
    return len(NARROW) - 1


@attrs.define
class _Exact:
    argv: tuple[str, ...]
    cwd: str
    calls: int = 0


@attrs.define
class _Group:
    program: str
    cwd: str
    with_word: bool
    words: dict[str, None] = attrs.field(factory=dict)
    rest: int = 0
    examples: list[tuple[str, ...]] = attrs.field(factory=list)
    calls: int = 0


def suggest_commands(calls: Iterable[tuple[Sequence[str], str]]) -> list[CommandSuggestion]:
    """Suggestions for valid calls ``(argv, cwd)`` (already through D2), in first-seen order."""
    exact: dict[tuple[tuple[str, ...], str], _Exact] = {}
    groups: dict[tuple[str, str, bool], _Group] = {}
    order: list[_Exact | _Group] = []
    for raw_argv, cwd in calls:
        argv = tuple(raw_argv)
        if runs_any_program(argv[0]):
            one = exact.get((argv, cwd))
            if one is None:
                if len(order) >= MAX_SUGGESTIONS:
                    continue
                one = exact[(argv, cwd)] = _Exact(argv=argv, cwd=cwd)
                order.append(one)
            one.calls += 1
            continue
        with_word = len(argv) > 1 and _WORD.fullmatch(argv[1]) is not None
        key = (argv[0], cwd, with_word)
        group = groups.get(key)
        if group is None:
            if len(order) >= MAX_SUGGESTIONS:
                continue
            group = groups[key] = _Group(program=argv[0], cwd=cwd, with_word=with_word)
            order.append(group)
        after = argv[2:] if with_word else argv[1:]
        if with_word:
            group.words.setdefault(argv[1])
        group.rest = max(group.rest, _narrowest_rest(after, cwd))
        if len(group.examples) < MAX_EXAMPLES and argv not in group.examples:
            group.examples.append(argv)
        group.calls += 1
    out: list[CommandSuggestion] = []
    for item in order:
        if isinstance(item, _Exact):
            out.append(
                CommandSuggestion(
                    prefix=tuple((t,) for t in item.argv), rest="none", paths=(item.cwd,),
                    examples=(item.argv,), calls=item.calls,
                )
            )
            continue
        prefix: Prefix = ((item.program,),)
        if item.with_word:
            prefix += (tuple(item.words),)
        out.append(
            CommandSuggestion(
                prefix=prefix, rest=NARROW[item.rest], paths=(item.cwd,),
                examples=tuple(item.examples), calls=item.calls,
            )
        )
    return out
