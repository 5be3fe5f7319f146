"""Typed arguments of an MCP tool (12 "Kinds", "Defaults", "Opaque tools", rule S13).

`tool_grammar` joins a pinned `inputSchema` (through the profile) and the
owner's tool table (kinds, `opaque`) into a `ToolGrammar`.  `effective_args`
parses a call's arguments against it: the schema's checks, then every absent
property with a `default` filled (at the root and inside every object
present), then the kinds, checked by the existing grammars of 03-policy on the
effective arguments (a JSON `null` counts as absent).  Values are validated as
written, never normalised.  An opaque tool takes any object of at most 64 KiB
in canonical form, nothing filled.  `kind_problems` is S13.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from .._grammar import host_problem, path_problem, url_problem
from .._json import type_word
from ._canonical import canonical_bytes
from ._decl_tool import Kind, ToolTable
from ._nodes import ArrayNode, Node, NullableNode, ObjectNode, StringNode
from ._profile import compile_schema
from ._validate import ArgumentError, check

MAX_OPAQUE_BYTES: Final = 64 * 1024
GRAMMAR_KINDS: Final = ("path", "write_path", "url", "host")


@attrs.frozen(kw_only=True)
class ToolGrammar:
    root: ObjectNode | None
    """None when the tool is opaque."""
    opaque: str | None
    """Why the tool is opaque (``the owner's opaque = true``, or the profile's reason)."""
    kinds: Mapping[str, Kind] = attrs.field(factory=dict)


def tool_grammar(input_schema: Any, table: ToolTable | None) -> ToolGrammar:
    if table is not None and table.opaque:
        return ToolGrammar(root=None, opaque="the owner made it opaque (opaque = true)")
    compiled = compile_schema(input_schema)
    if not isinstance(compiled, ObjectNode):
        return ToolGrammar(root=None, opaque=compiled.reason)
    return ToolGrammar(root=compiled, opaque=None,
                       kinds=dict(table.args) if table is not None else {})


def effective_args(grammar: ToolGrammar, args: Any) -> dict[str, Any]:
    """A call's arguments -> its effective arguments, or ArgumentError (`bad_args`)."""
    if not isinstance(args, dict):
        raise ArgumentError(f"expected an object, found {type_word(args)}", where=(),
                            rule="type")
    if grammar.root is None:
        if len(canonical_bytes(args)) > MAX_OPAQUE_BYTES:
            raise ArgumentError(f"expected at most {MAX_OPAQUE_BYTES} bytes in canonical form "
                                "for an opaque tool, found more", where=(), rule="size")
        return args
    effective: dict[str, Any] = check(grammar.root, args, (), fill=True)
    for dotted, kind in sorted(grammar.kinds.items()):
        if kind == "text":
            continue
        for where, value in _values_at(effective, dotted):
            problem = _kind_problem(kind, value)
            if problem is not None:
                raise ArgumentError(f"expected a value of kind {kind}: {problem}",
                                    where=where, rule=f"kind:{kind}")
    return effective


def kinded_values(grammar: ToolGrammar, effective: Mapping[str, Any]
                  ) -> list[tuple[str, Kind, str]]:
    """(dotted name, kind, value) of every non-null `path`, `write_path`, `url` and `host`
    value of effective arguments, array items one by one, in dotted-name order."""
    out: list[tuple[str, Kind, str]] = []
    for dotted, kind in sorted(grammar.kinds.items()):
        if kind in GRAMMAR_KINDS:
            out.extend((dotted, kind, value) for _, value in _values_at(effective, dotted))
    return out


def _values_at(effective: Mapping[str, Any], dotted: str) -> Iterator[tuple[tuple[str, ...],
                                                                              str]]:
    value: Any = effective
    where: tuple[str, ...] = ()
    for part in dotted.split("."):
        if not isinstance(value, dict) or value.get(part) is None:
            return
        value = value[part]
        where = (*where, part)
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                yield (*where, str(index)), item


def _kind_problem(kind: Kind, value: str) -> str | None:
    if kind in ("path", "write_path"):
        return path_problem(value)
    if kind == "url":
        return url_problem(value)
    return host_problem(value)


# -- S13 -------------------------------------------------------------------------------------


def _string_like(node: Node) -> bool:
    if isinstance(node, NullableNode):
        node = node.inner
    if isinstance(node, ArrayNode):
        node = node.items
        if isinstance(node, NullableNode):
            node = node.inner
    return isinstance(node, StringNode)


def _plain_string(node: Node) -> bool:
    inner = node.inner if isinstance(node, NullableNode) else node
    return isinstance(inner, StringNode)


def _walk(root: ObjectNode, dotted: str) -> tuple[Node | None, str | None, bool]:
    """The node a dotted name reaches, why not, and whether each step is required or
    has a default (an `arg:` egress needs that)."""
    node: Node = root
    always = True
    for part in dotted.split("."):
        if isinstance(node, NullableNode):
            node = node.inner
        if isinstance(node, ArrayNode) and isinstance(
                node.items.inner if isinstance(node.items, NullableNode) else node.items,
                ObjectNode):
            return None, "inside an array of objects", False
        if not isinstance(node, ObjectNode) or part not in node.properties:
            return None, "an argument the pinned schema does not have", False
        sub = node.properties[part]
        always = always and (part in node.required or sub.has_default)
        node = sub
    return node, None, always


def kind_problems(grammar: ToolGrammar, table: ToolTable | None) -> list[str]:
    """S13 for one tool: every message (expected and found); empty when it holds."""
    if table is None:
        return []
    if grammar.root is None:
        if table.args:
            return [f"args: expected no kinds on an opaque tool, found "
                    f"{len(table.args)} ({grammar.opaque})"]
        return []
    problems: list[str] = []
    for dotted, kind in sorted(table.args.items()):
        node, why, _ = _walk(grammar.root, dotted)
        if node is None:
            problems.append(f"args.{dotted}: expected an argument of the pinned schema, "
                            f"found {why}")
        elif not _string_like(node):
            problems.append(f"args.{dotted}: expected a string, nullable string or array of "
                            f"those for kind {kind}, found another node")
    egress = table.egress
    if egress is not None and egress.word == "arg" and egress.argument is not None:
        name = egress.argument
        node, why, always = _walk(grammar.root, name)
        kind = table.args.get(name, "text")
        if node is None:
            problems.append(f"egress arg:{name}: expected an argument of the pinned schema, "
                            f"found {why}")
        elif kind not in ("url", "host") or not _plain_string(node):
            problems.append(f"egress arg:{name}: expected a url or host string argument, "
                            f"found kind {kind}")
        elif not always:
            problems.append(f"egress arg:{name}: expected an argument the schema requires or "
                            "gives a default, found it optional")
    return problems
