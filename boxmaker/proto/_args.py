"""Tool arguments (03-policy "Tools and their arguments"): strict, typed.

`parse_args(tool, args)` structures a call's JSON object into the tool's
argument class (unknown fields refused, no coercion) and then checks the
path/URL grammar.  Every failure is an `ArgsError` whose message says which
rule; `tool` must be one of `TOOLS` (the caller denies `unknown_tool` first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from ._convert import structure, unstructure
from ._errors import DecodeError
from ._grammar import Url, parse_url, path_problem

ToolName = Literal["read_file", "list_dir", "write_file", "http_fetch", "echo"]
TOOLS: Final[tuple[ToolName, ...]] = ("read_file", "list_dir", "write_file", "http_fetch", "echo")
FILE_TOOLS: Final[frozenset[str]] = frozenset({"read_file", "list_dir", "write_file"})
READ_TOOLS: Final[frozenset[str]] = frozenset({"read_file", "list_dir", "http_fetch", "echo"})

MAX_WRITE_CONTENT_BYTES: Final = 1024 * 1024
"""`write_file` content: at most 1 MiB, counted in UTF-8 bytes."""

WriteMode = Literal["create", "replace", "append"]
HttpMethod = Literal["GET", "HEAD"]


class ArgsError(DecodeError):
    """A call's arguments do not parse, or a path/URL is not of its grammar."""


@attrs.frozen(kw_only=True)
class ReadFileArgs:
    path: str


@attrs.frozen(kw_only=True)
class ListDirArgs:
    path: str


@attrs.frozen(kw_only=True)
class WriteFileArgs:
    path: str
    content: str
    mode: WriteMode


@attrs.frozen(kw_only=True)
class HttpFetchArgs:
    url: str
    method: HttpMethod = "GET"
    """The only optional argument of any tool."""


@attrs.frozen(kw_only=True)
class EchoArgs:
    text: str


ToolArgs: TypeAlias = ReadFileArgs | ListDirArgs | WriteFileArgs | HttpFetchArgs | EchoArgs

ARGS_CLASSES: Final[dict[str, type[ToolArgs]]] = {
    "read_file": ReadFileArgs,
    "list_dir": ListDirArgs,
    "write_file": WriteFileArgs,
    "http_fetch": HttpFetchArgs,
    "echo": EchoArgs,
}


@attrs.frozen(kw_only=True)
class ParsedArgs:
    """A call's arguments after D2: the typed value and what the policy matches on."""

    args: ToolArgs
    path: str | None
    """The request path of a file tool, else None."""
    url: Url | None
    """The parsed URL of `http_fetch`, else None."""

    def as_json(self) -> dict[str, Any]:
        """The arguments as a JSON object, with defaults filled in."""
        value = unstructure(self.args)
        assert isinstance(value, dict)
        return value


def parse_args(tool: str, args: Mapping[str, Any]) -> ParsedArgs:
    """Structure and check `args` for `tool` (one of TOOLS); raise ArgsError."""
    cls = ARGS_CLASSES.get(tool)
    if cls is None:
        raise ValueError(f"not a tool: {tool!r}")  # our bug: D1 comes first
    if type(args) is not dict:
        raise ArgsError("arguments: expected a JSON object")
    try:
        typed: ToolArgs = structure(args, cls)
    except DecodeError as exc:
        raise ArgsError(f"arguments of {tool}: {exc}") from None
    if isinstance(typed, (ReadFileArgs, ListDirArgs, WriteFileArgs)):
        problem = path_problem(typed.path)
        if problem is not None:
            raise ArgsError(f"path: {problem}")
        if isinstance(typed, WriteFileArgs):
            try:
                size = len(typed.content.encode("utf-8"))
            except UnicodeEncodeError:
                raise ArgsError("content: not valid UTF-8 (a lone surrogate)") from None
            if size > MAX_WRITE_CONTENT_BYTES:
                raise ArgsError(f"content: more than 1 MiB ({size} bytes)")
        return ParsedArgs(args=typed, path=typed.path, url=None)
    if isinstance(typed, HttpFetchArgs):
        try:
            url = parse_url(typed.url)
        except DecodeError as exc:
            raise ArgsError(f"url: {exc.message}") from None
        return ParsedArgs(args=typed, path=None, url=url)
    return ParsedArgs(args=typed, path=None, url=None)
