"""The typed nodes a profiled `inputSchema` compiles to (`_profile.py`), and JSON helpers.

Frozen values; every `$ref` and one-node `allOf` is already resolved.  Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()


@attrs.frozen(kw_only=True)
class Node:
    default: Any = NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@attrs.frozen(kw_only=True)
class ObjectNode(Node):
    properties: Mapping[str, Node]
    required: frozenset[str] = frozenset()
    min_properties: int | None = None
    max_properties: int | None = None


@attrs.frozen(kw_only=True)
class StringNode(Node):
    min_length: int | None = None
    max_length: int | None = None
    enum: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class NumberNode(Node):
    integer: bool
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    enum: tuple[int | float, ...] | None = None


@attrs.frozen(kw_only=True)
class BooleanNode(Node):
    enum: tuple[bool, ...] | None = None


@attrs.frozen(kw_only=True)
class ArrayNode(Node):
    items: Node
    min_items: int | None = None
    max_items: int | None = None


@attrs.frozen(kw_only=True)
class NullNode(Node):
    pass


@attrs.frozen(kw_only=True)
class NullableNode(Node):
    inner: Node


@attrs.frozen(kw_only=True)
class Opaque:
    reason: str


def pointer(parts: tuple[str, ...]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts) or "/"


def json_equal(a: Any, b: Any) -> bool:
    """Equal in JSON type and value: 1, 1.0 and true differ."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def is_json_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_json_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
