"""The `args` of a grant for an MCP tool, checked against the pinned tool (G10..G14).

G10 needs no pin (a constraint key of no kind, `optional` not a boolean).
G11..G14 are pin-dependent (12 "Pin-dependent checks"): they never make the
grant set invalid; a failure makes an `allow`/`ask` grant dormant and, for a
`deny` grant, disables its tool.  The policy layer calls these with the
grant's raw `args` table and the tool's `ToolGrammar`.  Pure: no I/O.

Constraint keys by what the argument is:

| argument | keys |
|---|---|
| `text` string | `values`, `prefixes`, `max_bytes` |
| string or integer with `enum` | `values` (a subset of the enum) |
| `path`, `write_path` | `paths` (required) |
| `url` | `hosts` (required), `http`, `private_network` |
| `host` | `hosts` (required; patterns without a port) |
| integer, number | `min`, `max` |
| boolean | `value` |
| array of one of these | the item's keys, plus `max_items` |

and `optional` everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from .._grammar import path_problem
from ._arguments import ToolGrammar
from ._decl_tool import Kind, check_host_pattern, q, type_word
from ._nodes import (
    ArrayNode,
    BooleanNode,
    Node,
    NullableNode,
    NumberNode,
    ObjectNode,
    StringNode,
    is_json_int,
    is_json_number,
    json_equal,
)

CONSTRAINT_KEYS: Final = frozenset({"values", "prefixes", "max_bytes", "paths", "hosts", "http",
                                    "private_network", "min", "max", "value", "max_items",
                                    "optional"})
REQUIRED_KEY: Final[dict[str, str]] = {"path": "paths", "write_path": "paths", "url": "hosts",
                                       "host": "hosts"}
MAX_ENTRIES: Final = 1024
GrantRule = Literal["G10", "G11", "G12", "G13", "G14"]
Problem = tuple[GrantRule, str]


def g10_problems(args: Any) -> list[str]:
    """G10's pin-independent part: `args` a table of tables of constraint keys."""
    if not isinstance(args, dict):
        return [f"args: expected a table of tables, found {type_word(args)}"]
    problems: list[str] = []
    for name, table in args.items():
        if not isinstance(table, dict):
            problems.append(f"args.{name}: expected a table of constraints, found "
                            f"{type_word(table)}")
            continue
        for key in table:
            if key not in CONSTRAINT_KEYS:
                problems.append(f"args.{name}: expected constraint keys "
                                f"({', '.join(sorted(CONSTRAINT_KEYS))}), found {q(key)}")
        if "optional" in table and type(table["optional"]) is not bool:
            problems.append(f"args.{name}.optional: expected true or false, found "
                            f"{q(table['optional'])}")
    return problems


def _node_at(root: ObjectNode, dotted: str) -> Node | None:
    node: Node = root
    for part in dotted.split("."):
        if isinstance(node, NullableNode):
            node = node.inner
        if not isinstance(node, ObjectNode) or part not in node.properties:
            return None
        node = node.properties[part]
    return node


def _unwrap(node: Node) -> Node:
    return node.inner if isinstance(node, NullableNode) else node


def _allowed(node: Node, kind: Kind) -> tuple[set[str], str]:
    """The constraint keys of an argument and a word for it; for an array, its item's."""
    node = _unwrap(node)
    extra: set[str] = {"optional"}
    if isinstance(node, ArrayNode):
        extra.add("max_items")
        node = _unwrap(node.items)
    if isinstance(node, StringNode):
        if node.enum is not None:
            return {"values"} | extra, "an enum"
        if kind == "text":
            return {"values", "prefixes", "max_bytes"} | extra, "a text string"
        keys = {"path": {"paths"}, "write_path": {"paths"}, "host": {"hosts"},
                "url": {"hosts", "http", "private_network"}}[kind]
        return keys | extra, f"a {kind} string"
    if isinstance(node, NumberNode):
        if node.enum is not None:
            return {"values"} | extra, "an enum"
        return {"min", "max"} | extra, "an integer" if node.integer else "a number"
    if isinstance(node, BooleanNode):
        return {"value"} | extra, "a boolean"
    return extra, "an object"


def _values_problem(node: Node, values: Any) -> str | None:
    inner = _unwrap(node)
    if isinstance(inner, ArrayNode):
        inner = _unwrap(inner.items)
    if not isinstance(values, list) or not values or len(values) > MAX_ENTRIES:
        return f"expected a non-empty array of at most {MAX_ENTRIES}, found {q(values)}"
    enum = getattr(inner, "enum", None)
    for value in values:
        if enum is not None:
            if not any(json_equal(value, e) for e in enum):
                return f"expected values of the schema's enum, found {q(value)}"
        elif not isinstance(value, str):
            return f"expected strings, found {q(value)}"
    return None


def _check_value(key: str, value: Any, node: Node, kind: Kind) -> str | None:
    """Why `value` is not right for constraint `key` (G12), or None."""
    if key in ("optional", "http", "private_network", "value"):
        return None if type(value) is bool else f"expected true or false, found {q(value)}"
    if key in ("max_bytes", "max_items"):
        ok = is_json_int(value) and value >= 0
        return None if ok else f"expected a non-negative integer, found {q(value)}"
    if key == "values":
        return _values_problem(node, value)
    if key == "prefixes":
        ok = isinstance(value, list) and 0 < len(value) <= MAX_ENTRIES and all(
            isinstance(v, str) for v in value)
        return None if ok else f"expected a non-empty array of strings, found {q(value)}"
    if key in ("min", "max"):
        inner = _unwrap(node)
        if isinstance(inner, ArrayNode):
            inner = _unwrap(inner.items)
        integer = isinstance(inner, NumberNode) and inner.integer
        ok = is_json_int(value) if integer else is_json_number(value)
        return None if ok else f"expected {'an integer' if integer else 'a number'}, found " \
                               f"{q(value)}"
    if not isinstance(value, list) or not value or len(value) > MAX_ENTRIES:
        return f"expected a non-empty array of at most {MAX_ENTRIES}, found {q(value)}"
    for entry in value:
        if key == "paths":
            problem = path_problem(entry) if isinstance(entry, str) else "not a string"
        else:
            problem = check_host_pattern(entry)
            if problem is None and kind == "host" and ":" in entry:
                problem = "a host argument's pattern takes no port"
        if problem is not None:
            return f"expected entries of the {key[:-1]} grammar, found {q(entry)} ({problem})"
    return None


def grant_problems(grammar: ToolGrammar, *, mode: str, when_untrusted: str | None,
                   args: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """G11..G14 for one grant (its `args` already passed G10); empty when it holds."""
    if grammar.root is None:
        problems: list[Problem] = []
        if mode == "allow":
            problems.append(("G14", "mode: expected ask or deny for an opaque tool, found "
                                    "allow"))
        if when_untrusted == "allow":
            problems.append(("G14", "when_untrusted: expected ask or deny for an opaque tool, "
                                    "found allow"))
        if args:
            problems.append(("G14", f"args: expected none for an opaque tool, found "
                                    f"{len(args)}"))
        return problems
    problems = []
    for name in sorted(args):
        node = _node_at(grammar.root, name)
        if node is None:
            problems.append(("G11", f"args.{name}: expected an argument of the pinned schema, "
                                    "found none of that name"))
            continue
        kind = grammar.kinds.get(name, "text")
        allowed, word = _allowed(node, kind)
        table = args[name]
        for key in sorted(table):
            if key not in allowed:
                problems.append(("G12", f"args.{name}.{key}: expected a key of "
                                        f"{', '.join(sorted(allowed))} for {word}, found "
                                        f"{key}"))
                continue
            problem = _check_value(key, table[key], node, kind)
            if problem is not None:
                problems.append(("G12", f"args.{name}.{key}: {problem}"))
        low: Any = table.get("min")
        high: Any = table.get("max")
        if is_json_number(low) and is_json_number(high) and low > high:
            problems.append(("G12", f"args.{name}: expected min at most max, found "
                                    f"{low!r} > {high!r}"))
    if mode != "deny":
        for name, kind in sorted(grammar.kinds.items()):
            needed = REQUIRED_KEY.get(kind)
            if needed is not None and needed not in args.get(name, {}):
                problems.append(("G13", f"args.{name}: expected {needed} for a {kind} argument, "
                                        "found it unconstrained"))
    return problems
