"""The arguments of `run_command` (12-tool-sources "run_command"), validated as written.

`parse_run_command_args(args)` checks a call's JSON object and returns a
`RunCommandArgs`, or raises `ArgsError` (the `bad_args` problem of D2, its
message naming the argument and the rule) as `parse_args` does for the other
tools.  Nothing is split, joined, expanded or unwrapped: `argv` is the exec'd
argv.  Pure: no I/O.

- `argv`: an array of 1..256 strings, each UTF-8 without NUL and at most 4096
  bytes, 128 KiB in all; `argv[0]` a bare name
  (``[A-Za-z0-9][A-Za-z0-9._+-]{0,127}``) or of the path grammar; a `/` in a
  name that is not absolute (``./x``, ``bin/x``) is refused.
- `cwd`: of the path grammar, required.
- `stdin`: a string of at most 1 MiB (UTF-8), optional (absent: closed at once).

`program_problem` and `argv_problem` are shared with the grant rules (G17,
G19), so a grant's first token and its examples have exactly a call's form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._grammar import path_problem
from .._json import type_word
from ._args import ArgsError

MAX_ARGV: Final = 256
MAX_TOKEN_BYTES: Final = 4096
MAX_ARGV_BYTES: Final = 128 * 1024
"""The UTF-8 bytes of every token together (without terminators)."""
MAX_STDIN_BYTES: Final = 1024 * 1024

BARE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
FIELDS: Final = frozenset({"argv", "cwd", "stdin"})


@attrs.frozen(kw_only=True)
class RunCommandArgs:
    """A valid `run_command` call's arguments."""

    argv: tuple[str, ...]
    cwd: str
    stdin: str | None = None
    """None: stdin is closed at once."""

    def as_json(self) -> dict[str, Any]:
        """As the call carries them (`stdin` left out when absent)."""
        out: dict[str, Any] = {"argv": list(self.argv), "cwd": self.cwd}
        if self.stdin is not None:
            out["stdin"] = self.stdin
        return out


def _utf8_size(text: str) -> int | None:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def program_problem(token: str) -> str | None:
    """Why `token` is not of argv[0]'s form, or None when it is."""
    if token.startswith("/"):
        problem = path_problem(token)
        return None if problem is None else f"an absolute program must be of the {problem}"
    if "/" in token:
        return "a program with a / must be an absolute path (no ./x, no bin/x)"
    if BARE_NAME.fullmatch(token) is None:
        return "a bare program name must be of [A-Za-z0-9][A-Za-z0-9._+-]{0,127}"
    return None


def token_problem(token: object) -> str | None:
    """Why one argv entry is not a string of the argv rules, or None."""
    if type(token) is not str:
        return f"must be a string, not {type_word(token)}"
    size = _utf8_size(token)
    if size is None:
        return "is not valid UTF-8 (a lone surrogate)"
    if "\0" in token:
        return "holds a NUL"
    if size > MAX_TOKEN_BYTES:
        return f"is longer than {MAX_TOKEN_BYTES} bytes ({size})"
    return None


def argv_problem(argv: object) -> str | None:
    """Why `argv` is not a valid argv (array, sizes, tokens, argv[0]), or None."""
    if type(argv) is not list:
        return f"argv: expected an array of strings, not {type_word(argv)}"
    if not 1 <= len(argv) <= MAX_ARGV:
        return f"argv: 1 to {MAX_ARGV} strings, not {len(argv)}"
    total = 0
    for position, token in enumerate(argv):
        problem = token_problem(token)
        if problem is not None:
            return f"argv[{position}] {problem}"
        assert isinstance(token, str)
        total += len(token.encode("utf-8"))
        if total > MAX_ARGV_BYTES:
            return f"argv: more than {MAX_ARGV_BYTES} bytes in all"
    problem = program_problem(argv[0])
    if problem is not None:
        return f"argv[0]: {problem}"
    return None


def parse_run_command_args(args: Mapping[str, Any]) -> RunCommandArgs:
    """Check `args` as a `run_command` call's arguments; raise ArgsError."""
    if type(args) is not dict:
        raise ArgsError("arguments: expected a JSON object")
    unknown = sorted(set(args) - FIELDS)
    if unknown:
        name = json.dumps(unknown[0], ensure_ascii=True)
        raise ArgsError(f"arguments of run_command: unknown field {name[:200]}")
    for name in ("argv", "cwd"):
        if name not in args:
            raise ArgsError(f"arguments of run_command: {name} is required")
    argv = args["argv"]
    problem = argv_problem(argv)
    if problem is not None:
        raise ArgsError(problem)
    cwd = args["cwd"]
    if type(cwd) is not str:
        raise ArgsError(f"cwd: expected a string, not {type_word(cwd)}")
    problem = path_problem(cwd)
    if problem is not None:
        raise ArgsError(f"cwd: {problem}")
    stdin = args.get("stdin")
    if "stdin" in args:
        if type(stdin) is not str:
            raise ArgsError(f"stdin: expected a string, not {type_word(stdin)}")
        size = _utf8_size(stdin)
        if size is None:
            raise ArgsError("stdin: not valid UTF-8 (a lone surrogate)")
        if size > MAX_STDIN_BYTES:
            raise ArgsError(f"stdin: more than 1 MiB ({size} bytes)")
    return RunCommandArgs(argv=tuple(argv), cwd=cwd, stdin=stdin)
