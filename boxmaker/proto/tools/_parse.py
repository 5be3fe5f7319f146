"""`parse_args`: a call's arguments by its tool's grammar (03-policy D2), pure.

`parse_args(tool, args)` structures a call's JSON object into the tool's
argument class (unknown fields refused, no coercion) and then checks each
argument by its kind, in the catalogue's order: a path of the path grammar,
a text within its bytes, a URL of the URL grammar.  Every failure is an
`ArgsError` whose message says which rule; `tool` must be an available tool
of the catalogue (the caller denies `unknown_tool` first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._convert import structure
from .._errors import DecodeError
from .._grammar import Url, parse_url, path_problem
from ._args import ArgsError, ParsedArgs, ToolArgs
from ._catalogue import CATALOGUE

_MIB = 1024 * 1024


def _size_words(limit: int) -> str:
    return f"{limit // _MIB} MiB" if limit % _MIB == 0 else f"{limit} bytes"


def parse_args(tool: str, args: Mapping[str, Any]) -> ParsedArgs:
    """Structure and check `args` for `tool` (an available tool); raise ArgsError."""
    entry = CATALOGUE.get(tool)
    if entry is None:
        raise ValueError(f"not a tool: {tool!r}")  # our bug: D1 comes first
    if type(args) is not dict:
        raise ArgsError("arguments: expected a JSON object")
    typed: ToolArgs
    if entry.parser is not None:
        typed = entry.parser(args)
    else:
        assert entry.args_class is not None
        try:
            typed = structure(args, entry.args_class)
        except DecodeError as exc:
            raise ArgsError(f"arguments of {tool}: {exc}") from None
    path: str | None = None
    url: Url | None = None
    for arg in entry.args:
        value = getattr(typed, arg.name)
        if arg.kind in ("path", "write_path"):
            problem = path_problem(value)
            if problem is not None:
                raise ArgsError(f"{arg.name}: {problem}")
            path = value
        elif arg.kind == "url":
            try:
                url = parse_url(value)
            except DecodeError as exc:
                raise ArgsError(f"{arg.name}: {exc.message}") from None
        elif arg.max_bytes is not None and isinstance(value, str):
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise ArgsError(f"{arg.name}: not valid UTF-8 (a lone surrogate)") from None
            if size > arg.max_bytes:
                raise ArgsError(
                    f"{arg.name}: more than {_size_words(arg.max_bytes)} ({size} bytes)")
    return ParsedArgs(args=typed, path=path, url=url)
