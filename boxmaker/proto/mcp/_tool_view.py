"""What the model sees of a pinned tool (12 "What the model sees"), S17, and each tool's verdict.

For each offered tool the model gets its model name, as description the
owner's `description`, else the pinned one, else ``""``, and as parameters the
pinned `inputSchema` with local `$ref`s resolved (an opaque tool's as pinned).
Only pinned text, never the live list.  S17: if any string of these (object
keys included) holds a code point that 07-bxctl shows only as an escape
(`boxmaker.proto._escape`), other than ``\\n`` and ``\\t``, or more combining
marks on one character than it shows, the tool is disabled.

`tool_verdicts` puts names (S16), the profile, kinds (S13) and S17 together
for one pinned server: offered, or disabled by a rule, or not offered for its
name; the `tools` filter.  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

import attrs

from .._escape import MAX_MARKS, _is_hidden, is_mark
from ._arguments import ToolGrammar, kind_problems, tool_grammar
from ._canonical import canonical_bytes, canonical_sha256
from ._decl import ServerDecl
from ._names import NamedTool, model_name, name_tools, wire_name
from ._nodes import pointer
from ._pin import Pin

_REF: Final = re.compile(r"#/(\$defs|definitions)/([^/~]+)")
MAX_RESOLVE_DEPTH: Final = 64


@attrs.frozen(kw_only=True)
class ModelTool:
    """One item of broker.sock's `tools` answer."""

    name: str
    model_name: str
    description: str
    parameters: Any
    opaque: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "model_name": self.model_name,
                "description": self.description, "parameters": self.parameters,
                "opaque": self.opaque}


def resolve_refs(schema: Any) -> Any:
    """A profiled schema with every local `$ref` replaced by its definition (siblings such
    as `default` and `description` kept over it) and the root's `$defs`/`definitions`
    dropped.  Only for schemas the profile accepted (no cycles)."""
    if not isinstance(schema, dict):
        return schema
    defs = {group: schema.get(group) for group in ("$defs", "definitions")}

    def walk(value: Any, depth: int) -> Any:
        if depth > MAX_RESOLVE_DEPTH:
            raise ValueError("references nested too deeply")
        if isinstance(value, list):
            return [walk(item, depth + 1) for item in value]
        if not isinstance(value, dict):
            return value
        ref = value.get("$ref")
        match = _REF.fullmatch(ref) if isinstance(ref, str) else None
        if match is not None:
            table = defs.get(match.group(1))
            if isinstance(table, dict) and match.group(2) in table:
                target = walk(table[match.group(2)], depth + 1)
                siblings = {k: walk(v, depth + 1) for k, v in value.items() if k != "$ref"}
                return {**target, **siblings} if isinstance(target, dict) else target
        return {k: walk(v, depth + 1) for k, v in value.items()}

    resolved = walk({k: v for k, v in schema.items() if k not in ("$defs", "definitions")}, 0)
    return resolved


def hidden_in(text: str) -> int | None:
    """The first code point of `text` that bxctl shows only as an escape (not \\n, \\t)."""
    marks = 0
    for ch in text:
        cp = ord(ch)
        marks = marks + 1 if cp > 0x7F and is_mark(ch) else 0
        if marks > MAX_MARKS:
            return cp
        if ch in "\n\t" or 0x20 <= cp < 0x7F:
            continue
        if _is_hidden(cp):
            return cp
    return None


def _strings(value: Any, where: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*where, str(index)))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield (*where, key), key
            yield from _strings(item, (*where, key))


def s17_problem(view: ModelTool) -> str | None:
    for where, text in (((), view.description), *_strings(view.parameters, ())):
        cp = hidden_in(text)
        if cp is not None:
            place = "the description" if where == () else f"parameters {pointer(where)}"
            return (f"{place}: expected no code point that bxctl escapes, found "
                    f"U+{cp:04X}")
    return None


def model_view(server: str, local: str, raw: Mapping[str, Any], grammar: ToolGrammar,
               owner_description: str | None) -> ModelTool:
    described = raw.get("description")
    description = owner_description if owner_description is not None else (
        described if isinstance(described, str) else "")
    schema = raw.get("inputSchema")
    parameters = schema if grammar.opaque is not None else resolve_refs(schema)
    return ModelTool(name=wire_name(server, local), model_name=model_name(server, local),
                     description=description, parameters=parameters,
                     opaque=grammar.opaque is not None)


@attrs.frozen(kw_only=True)
class ToolVerdict:
    """One pinned tool of a server: offered (`view` set), or why not."""

    mcp_name: str
    local: str | None
    status: Literal["offered", "disabled", "unnamed", "filtered"]
    rule: str | None
    """S13, S16 or S17 when disabled."""
    message: str | None
    grammar: ToolGrammar | None
    view: ModelTool | None

    @property
    def opaque(self) -> str | None:
        return None if self.grammar is None else self.grammar.opaque


def tool_verdicts(decl: ServerDecl, pin: Pin) -> dict[str, ToolVerdict]:
    """Every tool of the pin, by MCP name: its verdict for this declaration."""
    aliases = {name: table.alias for name, table in decl.tool_tables.items()
               if table.alias is not None}
    named = name_tools(decl.id, [tool.name for tool in pin.tools], aliases)
    return {tool.name: _verdict(decl, tool.name, tool.raw, named[tool.name])
            for tool in pin.tools}


def _verdict(decl: ServerDecl, mcp_name: str, raw: Mapping[str, Any], name: NamedTool
             ) -> ToolVerdict:
    table = decl.tool_tables.get(mcp_name)
    grammar = tool_grammar(raw.get("inputSchema"), table)

    def verdict(status: Any, rule: str | None, message: str | None,
                view: ModelTool | None = None) -> ToolVerdict:
        return ToolVerdict(mcp_name=mcp_name, local=name.local, status=status, rule=rule,
                           message=message, grammar=grammar, view=view)

    if name.local is None:
        return verdict("disabled" if name.rule else "unnamed", name.rule, name.problem)
    problems = kind_problems(grammar, table)
    if problems:
        return verdict("disabled", "S13", "; ".join(problems))
    view = model_view(decl.id, name.local, raw, grammar,
                      table.description if table is not None else None)
    hidden = s17_problem(view)
    if hidden is not None:
        return verdict("disabled", "S17", hidden)
    if decl.tools and mcp_name not in decl.tools:
        return verdict("filtered", None, "left out by the server's tools list")
    return verdict("offered", None, None, view)


MAX_TOOLS_ANSWER: Final = 7 * 1024 * 1024


def tools_answer(servers: Mapping[str, Mapping[str, ToolVerdict]], *,
                 max_bytes: int = MAX_TOOLS_ANSWER) -> tuple[dict[str, Any], list[str]]:
    """broker.sock's `tools` answer: the offered tools, servers in id order, tools in
    local-name order, `digest` the hash of `items`; a server whose tools would make the
    items longer than `max_bytes` is left out whole (returned second)."""
    items: list[dict[str, Any]] = []
    left_out: list[str] = []
    used = 2
    for server in sorted(servers):
        offered = sorted((v for v in servers[server].values()
                          if v.status == "offered" and v.view is not None),
                         key=lambda v: v.local or "")
        mine = [v.view.to_json() for v in offered if v.view is not None]
        size = sum(len(canonical_bytes(item)) + 1 for item in mine)
        if used + size > max_bytes:
            left_out.append(server)
            continue
        used += size
        items.extend(mine)
    return {"digest": canonical_sha256(items), "items": items}, left_out


_PATH_SUFFIXES: Final = ("path", "file", "dir")


def suggested_kinds(grammar: ToolGrammar, input_schema: Any) -> dict[str, str]:
    """The kinds `bxctl mcp pin` suggests (never applies): ``format: uri`` suggests
    `url`, ``format: hostname`` `host`, a name ending in path, file or dir `path`; for
    string arguments (or arrays of them) of a profiled tool, by dotted name."""
    if grammar.root is None:
        return {}
    out: dict[str, str] = {}

    def string_of(node: Any) -> Any:
        if not isinstance(node, dict):
            return None
        for word in ("anyOf", "oneOf"):
            if isinstance(node.get(word), list):
                alts = [a for a in node[word] if isinstance(a, dict) and a.get("type") != "null"]
                return string_of(alts[0]) if len(alts) == 1 else None
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind == "array":
            return string_of(node.get("items"))
        return node if kind == "string" else None

    def walk(node: Any, prefix: str) -> None:
        props = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(props, dict):
            return
        for name, sub in props.items():
            dotted = f"{prefix}{name}"
            string = string_of(sub)
            if string is not None:
                fmt = string.get("format")
                if fmt in ("uri", "url", "iri"):
                    out[dotted] = "url"
                elif fmt == "hostname":
                    out[dotted] = "host"
                elif name.lower().endswith(_PATH_SUFFIXES):
                    out[dotted] = "path"
            elif isinstance(sub, dict):
                walk(sub, f"{dotted}.")

    walk(resolve_refs(input_schema), "")
    return out


def unused_entries(decl: ServerDecl, pin: Pin) -> tuple[list[str], list[str]]:
    """`tools` entries and tool tables naming a tool the pin does not have (not a
    problem: `bxctl mcp show` lists them as unused), each sorted."""
    names = {tool.name for tool in pin.tools}
    return (sorted(set(decl.tools) - names), sorted(set(decl.tool_tables) - names))
