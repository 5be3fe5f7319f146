"""The `[mcp_server.tool.X]` tables of a declaration (rule S12), host patterns (S7).

What can be checked without the pin: the fields, the alias grammar and its
uniqueness, the egress word, a description's size, the kinds' words.  Whether
an argument exists or can carry its kind is S13, pin-dependent (`_profile.py`).
Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from .._grammar import host_problem, port_problem
from .._json import type_word as json_type_word
from ._names import LOCAL_NAME

Kind = Literal["text", "path", "write_path", "url", "host"]
KINDS: Final[tuple[Kind, ...]] = ("text", "path", "write_path", "url", "host")
TOOL_FIELDS: Final = ("args", "alias", "description", "egress", "opaque")
PROPERTY: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_DESCRIPTION_BYTES: Final = 16 * 1024
MAX_TOOL_TABLES: Final = 1024
MAX_ARGS: Final = 256
MAX_TOOL_NAME: Final = 128


@attrs.frozen(kw_only=True)
class Egress:
    """``none``, ``server`` or ``arg:<property path>`` (`argument` set for the last)."""

    word: Literal["none", "server", "arg"]
    argument: str | None = None

    @property
    def text(self) -> str:
        return f"arg:{self.argument}" if self.word == "arg" else self.word


@attrs.frozen(kw_only=True)
class ToolTable:
    mcp_name: str
    args: Mapping[str, Kind] = attrs.field(factory=dict)
    """Dotted property path -> kind (absent arguments are ``text``)."""
    alias: str | None = None
    description: str | None = None
    egress: Egress | None = None
    """None: the default (``server`` when the server has hosts, else ``none``)."""
    opaque: bool = False


def default_egress(table: ToolTable | None, *, has_hosts: bool) -> Egress:
    if table is not None and table.egress is not None:
        return table.egress
    return Egress(word="server") if has_hosts else Egress(word="none")


def type_word(value: object) -> str:
    """TOML's name for a value's type."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, (dt.date, dt.time)):
        return "a date or time"
    return json_type_word(value)


def q(value: object) -> str:
    """A value from an owner's file for a message: JSON, ASCII, bounded; others by type."""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return "true" if value is True else "false" if value is False else f"({type_word(value)})"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 200 else text[:197] + "..."


def is_property_path(text: str) -> bool:
    return all(PROPERTY.fullmatch(part) is not None for part in text.split("."))


def check_host_pattern(text: object) -> str | None:
    """Why `text` is not a 03-policy host pattern (``[*.]host[:port]``), or None."""
    if type(text) is not str:
        return f"not a string but {type_word(text)}"
    if text.startswith("["):
        return "host grammar: an IP literal is never a host"
    rest, colon, port_text = text.partition(":")
    if colon:
        problem = port_problem(port_text)
        if problem is not None:
            return problem
    name = rest[2:] if rest.startswith("*.") else rest
    return host_problem(name)


def check_tool_tables(value: Any, *, has_hosts: bool) -> tuple[dict[str, ToolTable], list[str]]:
    """`[mcp_server.tool]` -> the tool tables by MCP name, and S12's messages."""
    if type(value) is not dict:
        return {}, [f"tool: expected a table of [mcp_server.tool.NAME] tables, found "
                    f"{type_word(value)}"]
    if len(value) > MAX_TOOL_TABLES:
        return {}, [f"tool: expected at most {MAX_TOOL_TABLES} tool tables, found {len(value)}"]
    problems: list[str] = []
    tables: dict[str, ToolTable] = {}
    aliases: dict[str, str] = {}
    for name, table in value.items():
        where = f"tool.{q(name)}"
        if not 1 <= len(name) <= MAX_TOOL_NAME:
            problems.append(f"{where}: expected an MCP tool name of 1..{MAX_TOOL_NAME} "
                            f"characters, found {len(name)}")
            continue
        if type(table) is not dict:
            problems.append(f"{where}: expected a table, found {type_word(table)}")
            continue
        found = _check_one(where, name, table, has_hosts, problems)
        if found is None:
            continue
        if found.alias is not None:
            if found.alias in aliases:
                problems.append(f"{where}.alias: expected unique in the server, found "
                                f"{q(found.alias)} also for tool.{q(aliases[found.alias])}")
                continue
            aliases[found.alias] = name
        tables[name] = found
    return tables, problems


def _check_one(where: str, name: str, table: Mapping[str, Any], has_hosts: bool,
               problems: list[str]) -> ToolTable | None:
    before = len(problems)
    for field in table:
        if field not in TOOL_FIELDS:
            problems.append(f"{where}: expected fields {', '.join(TOOL_FIELDS)}, found "
                            f"{q(field)}")
    alias = table.get("alias")
    if alias is not None and (type(alias) is not str or LOCAL_NAME.fullmatch(alias) is None):
        problems.append(f"{where}.alias: expected [A-Za-z0-9_-]{{1,64}}, found {q(alias)}")
    description = table.get("description")
    if description is not None:
        if type(description) is not str:
            problems.append(f"{where}.description: expected a string, found "
                            f"{type_word(description)}")
        elif "\x00" in description:
            problems.append(f"{where}.description: expected no NUL, found one")
        elif len(description.encode("utf-8", "replace")) > MAX_DESCRIPTION_BYTES:
            problems.append(f"{where}.description: expected at most {MAX_DESCRIPTION_BYTES} "
                            f"bytes, found {len(description.encode('utf-8', 'replace'))}")
    egress = _egress(where, table.get("egress"), has_hosts, problems)
    opaque = table.get("opaque", False)
    if type(opaque) is not bool:
        problems.append(f"{where}.opaque: expected true or false, found {q(opaque)}")
    args = _args(where, table.get("args", {}), problems)
    if len(problems) > before:
        return None
    return ToolTable(mcp_name=name, args=args, alias=alias, description=description,
                     egress=egress, opaque=opaque)


def _egress(where: str, value: Any, has_hosts: bool, problems: list[str]) -> Egress | None:
    if value is None:
        return None
    expected = f"{where}.egress: expected \"none\", \"server\" or \"arg:\" and a property path"
    if type(value) is not str:
        problems.append(f"{expected}, found {q(value)}")
        return None
    if value == "none":
        return Egress(word="none")
    if value == "server":
        if not has_hosts:
            problems.append(f"{where}.egress: expected non-empty hosts for \"server\", found "
                            "hosts empty")
            return None
        return Egress(word="server")
    if value.startswith("arg:") and is_property_path(value[4:]):
        return Egress(word="arg", argument=value[4:])
    problems.append(f"{expected}, found {q(value)}")
    return None


def _args(where: str, value: Any, problems: list[str]) -> dict[str, Kind]:
    if type(value) is not dict or len(value) > MAX_ARGS:
        problems.append(f"{where}.args: expected a table of at most {MAX_ARGS} kinds, found "
                        f"{q(value) if type(value) is not dict else len(value)}")
        return {}
    out: dict[str, Kind] = {}
    for key, kind in value.items():
        if not is_property_path(key):
            problems.append(f"{where}.args: expected property names joined by dots, found "
                            f"{q(key)}")
        elif type(kind) is not str or kind not in KINDS:
            problems.append(f"{where}.args.{key}: expected one of {', '.join(KINDS)}, found "
                            f"{q(kind)}")
        else:
            out[key] = kind
    return out
