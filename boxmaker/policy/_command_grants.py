"""The load-time rules of `run_command` grants (12-tool-sources "Grants"): pure.

`check_command_table` checks the run_command fields of one `[[grant]]` table
and reports each problem through the caller's `report(rule, message)` (the
`problem` method of the grant loader's table check), as G1..G9 are reported:

1. G2 unknown fields and fields a deny grant may not carry; G18 `args`;
2. G6 (amended) `paths` present and non-empty for allow/ask (optional for
   deny), G7 each entry of the path grammar;
3. G18 `write` a boolean, `rest` one of its words;
4. G17 `commands`: a non-empty array of non-empty prefixes, each token a
   string or a non-empty array of strings of argv's rules, the first token
   (each alternative) of argv[0]'s form;
5. G20 an allow grant (or `when_untrusted = "allow"`) with `rest` other than
   `none` whose first token names a shell, an exec wrapper or an interpreter;
6. G19 the `match` / `not_match` examples, with `cwd` the first `paths` entry
   (or ``/`` for a deny grant without paths).

The generic fields (`id`, `tool`, `mode`, `label`, `untrusted`, `max_label`,
`when_untrusted`, `note`) are the loader's; a run_command grant's `untrusted`
defaults to `UNTRUSTED_DEFAULT`.  Two rules need more than the table: G21
(`g21_problems`, with `[commands] path`) and G22 (`g22_problems`, with the
other grants' paths and labels as plain `Reader` values).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast

import attrs

from ..proto._grammar import is_below, path_problem
from ..proto._json import type_word
from ..proto._taint import LABELS, Label
from ..proto.tools import MAX_ARGV, argv_problem, program_problem, token_problem
from ._commands import RESTS, CommandGrant, Prefix, Rest, Token, match_command
from ._model import Mode, Rule

COMMAND_FIELDS: Final = frozenset(
    {
        "id", "tool", "mode", "paths", "write", "commands", "rest", "match", "not_match",
        "label", "untrusted", "max_label", "when_untrusted", "note",
    }
)
"""The fields of an allow/ask run_command grant."""
COMMAND_DENY_FIELDS: Final = frozenset(
    {"id", "tool", "mode", "commands", "paths", "match", "not_match", "note"}
)
UNTRUSTED_DEFAULT: Final = True
"""`untrusted` of a run_command grant when the table leaves it out."""

MAX_PREFIXES: Final = 1024
MAX_ALTERNATIVES: Final = 256
MAX_EXAMPLES: Final = 256
"""Bounds of `commands`, of one token's alternatives, and of `match` / `not_match`."""

RUNS_ANY_PROGRAM: Final = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox", "toybox", "env", "xargs",
        "nohup", "timeout", "nice", "ionice", "stdbuf", "time", "command", "exec", "eval", "sudo",
        "su", "doas", "chroot", "unshare", "nsenter", "setsid", "flock", "watch", "script",
        "strace", "ltrace", "gdb", "awk", "gawk", "mawk", "deno", "bun",
    }
)
"""G20: shells and exec wrappers, by name (or an absolute token's last component)."""
INTERPRETER: Final = re.compile(
    r"(python|pypy|perl|ruby|node|nodejs|php|lua|luajit|tclsh|wish|julia|Rscript)[0-9.]*"
)

Report = Callable[[Rule, str], None]


def _q(value: object) -> str:
    if not isinstance(value, (str, int, float)):
        return f"({type_word(value)})"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 200 else text[:197] + "..."


def runs_any_program(token: str) -> bool:
    """G20: `token` names a shell, an exec wrapper or an interpreter."""
    name = token.rsplit("/", 1)[-1] if token.startswith("/") else token
    return name in RUNS_ANY_PROGRAM or INTERPRETER.fullmatch(name) is not None


def check_command_table(
    table: Mapping[str, Any],
    *,
    grant_id: str | None,
    mode: Mode | None,
    when_untrusted: Mode | None,
    report: Report,
) -> CommandGrant | None:
    """The run_command fields of one table (steps above); None when any is wrong
    (or `grant_id` / `mode` is None: the loader has reported those)."""
    count = _Counter(report)
    allowed = _check_fields(table, mode, count)
    paths = _check_paths(table, mode, "paths" in allowed, count)
    write = table.get("write", False)
    if "write" in allowed and type(write) is not bool:
        count("G18", f"write must be true or false, not {type_word(write)}")
    rest = table.get("rest", "none")
    if "rest" in allowed and (type(rest) is not str or rest not in RESTS):
        count("G18", f"rest {_q(rest)} is not one of {', '.join(RESTS)}")
    commands = _check_commands(table, count)
    if commands is not None and mode is not None and rest in RESTS:
        _check_g20(commands, mode, when_untrusted, cast(Rest, rest), count)
    if count.problems or grant_id is None or mode is None or commands is None:
        return None
    grant = CommandGrant(
        id=grant_id,
        mode=mode,
        paths=tuple(paths),
        write=bool(write),
        commands=commands,
        rest=cast(Rest, rest),
    )
    _check_examples(table, grant, count)
    return None if count.problems else grant


class _Counter:
    def __init__(self, report: Report) -> None:
        self.report = report
        self.problems = 0

    def __call__(self, rule: Rule, message: str) -> None:
        self.problems += 1
        self.report(rule, message)


def _check_fields(table: Mapping[str, Any], mode: Mode | None, report: Report) -> set[str]:
    allowed: set[str] = set()
    for name in table:
        if name in ("id", "tool", "mode"):
            continue
        if name == "args":
            report("G18", "args is not a field of a run_command grant")
            continue
        if name not in COMMAND_FIELDS:
            report("G2", f"unknown field {_q(name)} for run_command")
            continue
        if mode == "deny" and name not in COMMAND_DENY_FIELDS:
            report(
                "G2",
                f"{name} is not allowed in a deny run_command grant "
                "(only id, tool, mode, commands, paths, match, not_match, note)",
            )
            continue
        allowed.add(name)
    return allowed


def _check_paths(
    table: Mapping[str, Any], mode: Mode | None, allowed: bool, report: Report
) -> list[str]:
    if "paths" not in table:
        if mode in ("allow", "ask"):
            report("G6", "a grant for run_command needs paths (mounted; cwd lies in one)")
        return []
    if not allowed:
        return []
    value = table["paths"]
    if type(value) is not list:
        report("G6", f"paths must be an array, not {type_word(value)}")
        return []
    if not value:
        report("G6", "paths is an empty list")
        return []
    out: list[str] = []
    for position, path in enumerate(value):
        if type(path) is not str:
            report("G7", f"paths[{position}] must be a string, not {type_word(path)}")
            continue
        problem = path_problem(path)
        if problem is not None:
            report("G7", f"paths[{position}] {_q(path)}: {problem}")
            continue
        out.append(path)
    return out


def _check_token(value: Any, where: str, first: bool, report: Report) -> Token | None:
    items = value if type(value) is list else [value]
    if type(value) is list and not value:
        report("G17", f"{where} is an empty list of alternatives")
        return None
    if len(items) > MAX_ALTERNATIVES:
        report("G17", f"{where} has more than {MAX_ALTERNATIVES} alternatives")
        return None
    out: list[str] = []
    for item in items:
        if type(item) is not str:
            report(
                "G17", f"{where} must be a string or a non-empty list of strings, "
                f"not holding {type_word(item)}"
            )
            return None
        problem = token_problem(item) or (program_problem(item) if first else None)
        if problem is not None:
            report("G17", f"{where} {_q(item)}: {problem}")
            return None
        out.append(item)
    return tuple(out)


def _check_commands(table: Mapping[str, Any], report: Report) -> tuple[Prefix, ...] | None:
    if "commands" not in table:
        report("G17", "a run_command grant needs commands (its prefixes)")
        return None
    value = table["commands"]
    if type(value) is not list or not value:
        what = "an empty list" if type(value) is list else type_word(value)
        report("G17", f"commands must be a non-empty array of prefixes, not {what}")
        return None
    if len(value) > MAX_PREFIXES:
        report("G17", f"commands has more than {MAX_PREFIXES} prefixes")
        return None
    prefixes: list[Prefix] = []
    ok = True
    for index, prefix in enumerate(value):
        where = f"commands[{index}]"
        if type(prefix) is not list or not prefix:
            what = "an empty prefix" if type(prefix) is list else type_word(prefix)
            report("G17", f"{where} must be a non-empty array of tokens, not {what}")
            ok = False
            continue
        if len(prefix) > MAX_ARGV:
            report("G17", f"{where} is longer than an argv ({MAX_ARGV} tokens)")
            ok = False
            continue
        tokens = [
            _check_token(token, f"{where}[{at}]", at == 0, report)
            for at, token in enumerate(prefix)
        ]
        if any(t is None for t in tokens):
            ok = False
            continue
        prefixes.append(tuple(cast(Token, t) for t in tokens))
    return tuple(prefixes) if ok else None


def _check_g20(
    commands: tuple[Prefix, ...],
    mode: Mode,
    when_untrusted: Mode | None,
    rest: Rest,
    report: Report,
) -> None:
    if rest == "none" or "allow" not in (mode, when_untrusted):
        return
    for index, prefix in enumerate(commands):
        for name in prefix[0]:
            if runs_any_program(name):
                report(
                    "G20",
                    f"commands[{index}][0] {_q(name)} is a shell, an exec wrapper or an "
                    f"interpreter: allowed with rest {rest} it runs any program; such a "
                    "grant may only ask (or use rest none)",
                )
                break


def _check_examples(table: Mapping[str, Any], grant: CommandGrant, report: Report) -> None:
    cwd = grant.paths[0] if grant.paths else "/"
    for name, want in (("match", True), ("not_match", False)):
        if name not in table:
            continue
        examples = table[name]
        if type(examples) is not list:
            report("G19", f"{name} must be an array of argv arrays, not {type_word(examples)}")
            continue
        if len(examples) > MAX_EXAMPLES:
            report("G19", f"{name} has more than {MAX_EXAMPLES} examples")
            continue
        for at, example in enumerate(examples):
            problem = argv_problem(example)
            if problem is not None:
                report("G19", f"{name}[{at}] is not an argv: {problem}")
                continue
            matched = match_command(grant, example, cwd) is not None
            if matched != want:
                shown = " ".join(_q(token) for token in example[:16])
                more = " ..." if len(example) > 16 else ""
                verb = "does not match" if want else "matches"
                report(
                    "G19",
                    f"{name}[{at}] [{shown}{more}]: the grant {verb} it (cwd {_q(cwd)}), "
                    f"so it is no example for {name}",
                )


# -- rules across the set -----------------------------------------------------------------


def g21_problems(grant: CommandGrant, commands_path: Sequence[str]) -> list[str]:
    """G21: the entries of a non-deny grant equal to, above or below a directory of
    `[commands] path` (a mount there would replace the image's programs)."""
    if grant.mode == "deny":
        return []
    out: list[str] = []
    for entry in grant.paths:
        for directory in commands_path:
            if is_below(entry, directory) or is_below(directory, entry):
                out.append(
                    f"paths entry {_q(entry)} overlaps {_q(directory)} of [commands] path: "
                    "a mount there would replace the programs run_command runs"
                )
                break
    return out


@attrs.frozen(kw_only=True)
class Reader:
    """A non-deny grant that reads paths at a label (read_file, list_dir, run_command,
    or an MCP grant's `paths` constraint), for G22."""

    grant: str
    paths: tuple[str, ...]
    label: Label


_RANK: Final[dict[str, int]] = {label: rank for rank, label in enumerate(LABELS)}


def g22_problems(
    grant: CommandGrant, label: Label, max_label: Label, readers: Iterable[Reader]
) -> list[str]:
    """G22: a writable non-deny run_command grant whose `paths` overlap a path that a
    reader reads at a label lower than the highest of this grant's `label` and
    `max_label`.  The grant itself is one reader (its own `paths` at its `label`);
    a reader with its id is skipped, so the caller may pass every grant."""
    if grant.mode == "deny" or not grant.write:
        return []
    top = max(_RANK[label], _RANK[max_label])
    high = LABELS[top]
    everyone = [Reader(grant=grant.id, paths=grant.paths, label=label)]
    everyone += [r for r in readers if r.grant != grant.id]
    out: list[str] = []
    for reader in everyone:
        if _RANK[reader.label] >= top:
            continue
        for entry in grant.paths:
            hit = next(
                (p for p in reader.paths if is_below(p, entry) or is_below(entry, p)), None
            )
            if hit is not None:
                who = "this grant itself" if reader.grant == grant.id else f"grant {reader.grant}"
                out.append(
                    f"write = true on {_q(entry)} at up to {high}, but {who} reads "
                    f"{_q(hit)} at {reader.label}: what a command writes there would be "
                    "read back at a lower label"
                )
                break
    return out
