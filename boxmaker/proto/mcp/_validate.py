"""Checking a value against the typed nodes of a profiled schema (12 "The profile").

`check` walks a value and a node together: types without coercion (`1.0` is
no integer, `true` no number), `enum`/`const` by JSON type and value, closed
objects, `required`, lengths in code points, bounds by exact comparison,
`minItems`/`maxItems` (and at most 1024 items), `minProperties`/`maxProperties`
on the object as it ends up.  With `fill` every absent property that has a
`default` is filled, at every object present (nothing inside a filled default).
`pattern`, `format`, `multipleOf` and `uniqueItems` are the server's business
and never evaluated.  Pure: no I/O.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import attrs

from .._errors import DecodeError
from .._json import type_word
from ._nodes import (
    ArrayNode,
    BooleanNode,
    Node,
    NullableNode,
    NullNode,
    NumberNode,
    ObjectNode,
    StringNode,
    is_json_int,
    is_json_number,
    json_equal,
    pointer,
)

MAX_ITEMS: Final = 1024


class ArgumentError(DecodeError):
    """Arguments that do not parse (`bad_args`): `path` is the JSON Pointer, `rule` the
    schema keyword (or kind) they broke."""

    def __init__(self, message: str, *, where: tuple[str, ...], rule: str) -> None:
        super().__init__(message, path=pointer(where))
        self.rule = rule


@attrs.frozen(kw_only=True)
class ArgProblem:
    pointer: str
    rule: str
    message: str


def value_problem(node: Node, value: Any, where: tuple[str, ...]) -> ArgProblem | None:
    """Why `value` does not validate against `node` (nothing filled), or None."""
    try:
        check(node, value, where, fill=False)
    except ArgumentError as exc:
        return ArgProblem(pointer=exc.path or "/", rule=exc.rule, message=exc.message)
    return None


def check(node: Node, value: Any, where: tuple[str, ...], *, fill: bool) -> Any:
    """`value` checked against `node`; with `fill`, a copy with the defaults filled."""
    if isinstance(node, NullableNode):
        return None if value is None else check(node.inner, value, where, fill=fill)
    if isinstance(node, NullNode):
        if value is not None:
            raise _error(where, "type", "null", value)
        return None
    if isinstance(node, ObjectNode):
        return _object(node, value, where, fill)
    if isinstance(node, StringNode):
        if not isinstance(value, str):
            raise _error(where, "type", "a string", value)
        _enum(node.enum, value, where)
        length = len(value)
        if node.min_length is not None and length < node.min_length:
            raise ArgumentError(f"expected at least {node.min_length} characters, found "
                                f"{length}", where=where, rule="minLength")
        if node.max_length is not None and length > node.max_length:
            raise ArgumentError(f"expected at most {node.max_length} characters, found "
                                f"{length}", where=where, rule="maxLength")
        return value
    if isinstance(node, NumberNode):
        return _number(node, value, where)
    if isinstance(node, BooleanNode):
        if not isinstance(value, bool):
            raise _error(where, "type", "true or false", value)
        _enum(node.enum, value, where)
        return value
    if isinstance(node, ArrayNode):
        if not isinstance(value, list):
            raise _error(where, "type", "an array", value)
        count = len(value)
        if count > MAX_ITEMS:
            raise ArgumentError(f"expected at most {MAX_ITEMS} items, found {count}",
                                where=where, rule="maxItems")
        if node.min_items is not None and count < node.min_items:
            raise ArgumentError(f"expected at least {node.min_items} items, found {count}",
                                where=where, rule="minItems")
        if node.max_items is not None and count > node.max_items:
            raise ArgumentError(f"expected at most {node.max_items} items, found {count}",
                                where=where, rule="maxItems")
        return [check(node.items, item, (*where, str(i)), fill=fill)
                for i, item in enumerate(value)]
    raise TypeError(f"not a node: {node!r}")


def _object(node: ObjectNode, value: Any, where: tuple[str, ...], fill: bool) -> Any:
    if not isinstance(value, dict):
        raise _error(where, "type", "an object", value)
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = node.properties.get(key)
        if sub is None:
            raise ArgumentError("expected only the schema's properties, found another",
                                where=(*where, key), rule="additionalProperties")
        out[key] = check(sub, item, (*where, key), fill=fill)
    for key in sorted(node.required):
        if key not in value:
            raise ArgumentError("expected this required property, found none",
                                where=(*where, key), rule="required")
    if fill:
        for key, sub in node.properties.items():
            if key not in out and sub.has_default:
                out[key] = copy.deepcopy(sub.default)
    count = len(out)
    if node.min_properties is not None and count < node.min_properties:
        raise ArgumentError(f"expected at least {node.min_properties} properties, found "
                            f"{count}", where=where, rule="minProperties")
    if node.max_properties is not None and count > node.max_properties:
        raise ArgumentError(f"expected at most {node.max_properties} properties, found "
                            f"{count}", where=where, rule="maxProperties")
    return out if fill else value


def _number(node: NumberNode, value: Any, where: tuple[str, ...]) -> Any:
    if node.integer and not is_json_int(value):
        raise _error(where, "type", "an integer", value)
    if not is_json_number(value):
        raise _error(where, "type", "a number", value)
    _enum(node.enum, value, where)
    bounds: tuple[tuple[str, int | float | None, str], ...] = (
        ("minimum", node.minimum, "at least"), ("maximum", node.maximum, "at most"),
        ("exclusiveMinimum", node.exclusive_minimum, "more than"),
        ("exclusiveMaximum", node.exclusive_maximum, "less than"))
    for rule, bound, words in bounds:
        if bound is None:
            continue
        holds = {"minimum": value >= bound, "maximum": value <= bound,
                 "exclusiveMinimum": value > bound, "exclusiveMaximum": value < bound}[rule]
        if not holds:
            raise ArgumentError(f"expected {words} {bound!r}, found {value!r}", where=where,
                                rule=rule)
    return value


def _enum(values: tuple[Any, ...] | None, value: Any, where: tuple[str, ...]) -> None:
    if values is not None and not any(json_equal(value, v) for v in values):
        raise ArgumentError(f"expected one of {len(values)} values of the enum, found another",
                            where=where, rule="enum")


def _error(where: tuple[str, ...], rule: str, expected: str, value: Any) -> ArgumentError:
    return ArgumentError(f"expected {expected}, found {type_word(value)}", where=where,
                         rule=rule)
