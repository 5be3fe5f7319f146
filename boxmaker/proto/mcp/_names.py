"""Tool names of MCP servers (12 "Tool names") and rule S16.

- a server id is ``[a-z][a-z0-9-]{0,30}``;
- a tool's local name is its MCP name when that is ``[A-Za-z0-9_-]{1,64}``,
  else its owner-given ``alias``; a tool with neither is not offered;
- boxmaker's name is ``mcp.<id>.<local name>`` (a local name has no ``.``, so
  the split is unique); the model name is ``mcp__<id>__<local name>`` (an id
  has no ``_``), at most 64 characters (S16).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

SERVER_ID: Final = re.compile(r"[a-z][a-z0-9-]{0,30}")
LOCAL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_MODEL_NAME: Final = 64
WIRE_PREFIX: Final = "mcp."
MODEL_PREFIX: Final = "mcp__"


def is_server_id(text: str) -> bool:
    return SERVER_ID.fullmatch(text) is not None


def is_local_name(text: str) -> bool:
    return LOCAL_NAME.fullmatch(text) is not None


def local_name(mcp_name: str, alias: str | None) -> str | None:
    """The tool's local name: its MCP name when of the grammar, else the alias."""
    if alias is not None:
        return alias
    return mcp_name if is_local_name(mcp_name) else None


def wire_name(server: str, local: str) -> str:
    return f"{WIRE_PREFIX}{server}.{local}"


def model_name(server: str, local: str) -> str:
    return f"{MODEL_PREFIX}{server}__{local}"


def split_wire_name(name: str) -> tuple[str, str] | None:
    """``mcp.<id>.<local>`` -> (id, local), or None when the name is not of the form."""
    if not name.startswith(WIRE_PREFIX):
        return None
    server, dot, local = name[len(WIRE_PREFIX):].partition(".")
    if not dot or not is_server_id(server) or not is_local_name(local):
        return None
    return server, local


def split_model_name(name: str) -> tuple[str, str] | None:
    """``mcp__<id>__<local>`` -> (id, local), or None."""
    if not name.startswith(MODEL_PREFIX):
        return None
    server, sep, local = name[len(MODEL_PREFIX):].partition("__")
    if not sep or not is_server_id(server) or not is_local_name(local):
        return None
    return server, local


@attrs.frozen(kw_only=True)
class NamedTool:
    """One tool of a server with its names, or why it has none."""

    mcp_name: str
    local: str | None
    """None when the tool is not offered for its name (see `problem`)."""
    rule: str | None
    """``S16`` when the rule disables the tool; None when it has a name or only lacks one."""
    problem: str | None


def name_tools(server: str, mcp_names: Iterable[str],
               aliases: Mapping[str, str]) -> dict[str, NamedTool]:
    """Each MCP name of a pinned list -> its `NamedTool` (S16 applied).

    `aliases` maps MCP names to the owner's aliases (already of the grammar, S12).
    Two tools with one local name are both disabled; so is a model name over 64.
    """
    names = list(mcp_names)
    out: dict[str, NamedTool] = {}
    locals_: dict[str, str] = {}
    claims: dict[str, set[str]] = {}
    """A name -> the tools that hold it as local name or as MCP name."""
    for name in names:
        local = local_name(name, aliases.get(name))
        if local is None:
            out[name] = NamedTool(
                mcp_name=name, local=None, rule=None,
                problem="the MCP name is outside [A-Za-z0-9_-]{1,64} and the tool has "
                        "no alias: expected an alias in [mcp_server.tool.NAME]")
            continue
        locals_[name] = local
        claims.setdefault(local, set()).add(name)
        if is_local_name(name):
            claims.setdefault(name, set()).add(name)
    for name, local in locals_.items():
        others = sorted(claims[local] - {name})
        if others:
            shown = ", ".join(repr(o) for o in others)
            out[name] = NamedTool(
                mcp_name=name, local=None, rule="S16",
                problem=f"local name {local!r}: expected one tool, found it also held by {shown}")
            for other in others:
                out[other] = NamedTool(
                    mcp_name=other, local=None, rule="S16",
                    problem=f"local name {locals_[other]!r}: expected one tool, found "
                            f"{local!r} of {name!r} equal to a name it holds")
            continue
        if name in out:
            continue
        model = model_name(server, local)
        if len(model) > MAX_MODEL_NAME:
            out[name] = NamedTool(
                mcp_name=name, local=None, rule="S16",
                problem=f"model name {model!r}: expected at most {MAX_MODEL_NAME} "
                        f"characters, found {len(model)}")
            continue
        out[name] = NamedTool(mcp_name=name, local=local, rule=None, problem=None)
    return {name: out[name] for name in names}
