"""Tool arguments as typed values (03-policy "Tools and their arguments"): pure.

One frozen class per built-in tool's arguments, structured by the one strict
converter (unknown fields refused, no coercion); `ParsedArgs` is a call's
arguments after D2, with what the policy matches on.  Which class is whose is
the catalogue's (`Tool.args_class`); `parse_args` (`_parse.py`) uses it.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import attrs

from .._convert import unstructure
from .._errors import DecodeError
from .._grammar import Url

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


@attrs.frozen(kw_only=True)
class ParsedArgs:
    """A call's arguments after D2: the typed value and what the policy matches on."""

    args: ToolArgs
    path: str | None
    """The request path of a tool with a path target, else None."""
    url: Url | None
    """The parsed URL of a tool with a URL target, else None."""

    def as_json(self) -> dict[str, Any]:
        """The arguments as a JSON object, with defaults filled in."""
        value = unstructure(self.args)
        assert isinstance(value, dict)
        return value
