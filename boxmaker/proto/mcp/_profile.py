"""The schema profile (12 "The profile"): an `inputSchema` to typed nodes, or opaque.

A schema inside the profile becomes a tree of frozen nodes (`ObjectNode`,
`StringNode`, ...) with every `$ref` and one-node `allOf` resolved; anything
else makes the tool **opaque**, with the reason (`Opaque.reason`, naming the
JSON Pointer of the node).  A keyword boxmaker does not know may carry meaning
it cannot check, so it is refused rather than ignored.  Bounds: depth 8
(object properties and array items), 512 nodes after resolution, 256 enum
values, 64 KiB of canonical schema.  Parsing arguments against the nodes is
`_arguments.py`'s.  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._errors import DecodeError
from ._canonical import canonical_bytes
from ._nodes import (
    NO_DEFAULT,
    ArrayNode,
    BooleanNode,
    Node,
    NullableNode,
    NullNode,
    NumberNode,
    ObjectNode,
    Opaque,
    StringNode,
    is_json_int,
    is_json_number,
    json_equal,
    pointer,
)
from ._validate import value_problem

MAX_SCHEMA_BYTES: Final = 64 * 1024
MAX_DEPTH: Final = 8
MAX_NODES: Final = 512
MAX_ENUM: Final = 256
MAX_ITEMS: Final = 1024
PROPERTY: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
SCHEMA_URIS: Final = frozenset({"https://json-schema.org/draft/2020-12/schema",
                                "http://json-schema.org/draft-07/schema#",
                                "http://json-schema.org/draft-07/schema"})
ANNOTATIONS: Final = frozenset({"title", "description", "$comment", "examples", "deprecated",
                                "readOnly", "writeOnly", "format", "contentMediaType",
                                "contentEncoding"})
ROOT_ONLY: Final = frozenset({"$schema", "$defs", "definitions"})
_NUMBER_KEYS: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                 "multipleOf", "enum", "const", "default"})
FORM_KEYS: Final[dict[str, frozenset[str]]] = {
    "object": frozenset({"properties", "required", "additionalProperties", "minProperties",
                         "maxProperties", "default"}),
    "string": frozenset({"minLength", "maxLength", "pattern", "enum", "const", "default"}),
    "integer": _NUMBER_KEYS,
    "number": _NUMBER_KEYS,
    "boolean": frozenset({"enum", "const", "default"}),
    "array": frozenset({"items", "minItems", "maxItems", "uniqueItems", "default"}),
    "null": frozenset(),
}
_REF: Final = re.compile(r"#/(\$defs|definitions)/([^/~]+)")


class _Refuse(DecodeError):
    """Internal: the schema leaves the profile (becomes `Opaque`)."""


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.nodes = 0
        self.resolving: list[str] = []

    def refuse(self, where: tuple[str, ...], why: str) -> _Refuse:
        return _Refuse(f"{pointer(where)}: {why}")

    def compile(self, schema: Any, where: tuple[str, ...], depth: int, *,
                root: bool = False, null_ok: bool = False) -> Node:
        if not isinstance(schema, dict):
            raise self.refuse(where, "a schema of true, false or not an object")
        if not schema or all(key in ANNOTATIONS or key.startswith("x-") for key in schema):
            raise self.refuse(where, "a schema that allows anything ({})")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.refuse(where, f"more than {MAX_NODES} nodes after resolution")
        for key in schema:
            if key in ROOT_ONLY and not root:
                raise self.refuse(where, f"{key} below the root")
        if root and "$schema" in schema and schema["$schema"] not in SCHEMA_URIS:
            raise self.refuse(where, "$schema that is neither 2020-12 nor draft-07")
        own = {k: v for k, v in schema.items()
               if k not in ANNOTATIONS and not k.startswith("x-") and k not in ROOT_ONLY}
        node = self._form(own, where, depth)
        if isinstance(node, NullNode) and not null_ok:
            raise self.refuse(where, "a null node outside a nullable form")
        if "default" in own:
            problem = value_problem(node, own["default"], ())
            if problem is not None:
                raise self.refuse(where, f"a default that does not validate ({problem})")
            node = attrs.evolve(node, default=own["default"])
        return node

    def _form(self, own: dict[str, Any], where: tuple[str, ...], depth: int) -> Node:
        if "$ref" in own:
            self._only(own, {"$ref", "default"}, where, "reference")
            return self._ref(own["$ref"], where, depth)
        if "allOf" in own:
            self._only(own, {"allOf", "default"}, where, "allOf")
            items = own["allOf"]
            if not isinstance(items, list) or len(items) != 1:
                raise self.refuse(where, "allOf of other than exactly one node")
            return self.compile(items[0], (*where, "allOf", "0"), depth)
        for word in ("anyOf", "oneOf"):
            if word in own:
                self._only(own, {word, "default"}, where, word)
                return self._nullable_of(own[word], (*where, word), depth)
        if "type" in own:
            kind = own["type"]
            if isinstance(kind, list):
                if len(kind) != 2 or "null" not in kind or kind[0] == kind[1]:
                    raise self.refuse(where, "a type list other than [T, \"null\"]")
                other = kind[0] if kind[1] == "null" else kind[1]
                if not isinstance(other, str) or other == "null" or other not in FORM_KEYS:
                    raise self.refuse(where, "a type list other than [T, \"null\"]")
                inner = self._typed(other, {**own, "type": other}, where, depth)
                return NullableNode(inner=attrs.evolve(inner, default=NO_DEFAULT))
            if not isinstance(kind, str) or kind not in FORM_KEYS:
                raise self.refuse(where, "an unknown type")
            return self._typed(kind, own, where, depth)
        if "enum" in own or "const" in own:
            self._only(own, {"enum", "const", "default"}, where, "string enum")
            return StringNode(enum=self._enum(own, where, str))
        raise self.refuse(where, f"no form of the profile (keys {', '.join(sorted(own))})")

    def _only(self, own: Mapping[str, Any], keys: set[str], where: tuple[str, ...],
              form: str) -> None:
        for key in own:
            if key not in keys:
                raise self.refuse(where, f"keyword {key} beside {form}")

    def _ref(self, ref: Any, where: tuple[str, ...], depth: int) -> Node:
        match = _REF.fullmatch(ref) if isinstance(ref, str) else None
        if match is None:
            raise self.refuse(where, "a $ref that is not #/$defs/N or #/definitions/N")
        table = self.root.get(match.group(1))
        if not isinstance(table, dict) or match.group(2) not in table:
            raise self.refuse(where, "a $ref to a definition that is not there")
        if ref in self.resolving:
            raise self.refuse(where, "a $ref cycle")
        self.resolving.append(ref)
        try:
            return self.compile(table[match.group(2)], (match.group(1), match.group(2)), depth)
        finally:
            self.resolving.pop()

    def _nullable_of(self, items: Any, where: tuple[str, ...], depth: int) -> Node:
        if not isinstance(items, list) or len(items) != 2:
            raise self.refuse(where, "anyOf/oneOf of other than two nodes")
        nodes = [self.compile(item, (*where, str(i)), depth, null_ok=True)
                 for i, item in enumerate(items)]
        nulls = [isinstance(node, NullNode) for node in nodes]
        if nulls.count(True) != 1:
            raise self.refuse(where, "anyOf/oneOf without exactly one null node")
        inner = nodes[1] if nulls[0] else nodes[0]
        if isinstance(inner, NullableNode):
            raise self.refuse(where, "a nullable form inside a nullable form")
        return NullableNode(inner=inner)

    def _typed(self, kind: str, own: dict[str, Any], where: tuple[str, ...],
               depth: int) -> Node:
        allowed = FORM_KEYS[kind] | {"type"}
        for key in own:
            if key not in allowed:
                raise self.refuse(where, f"keyword {key} (not of the {kind} form)")
        if kind == "object":
            return self._object(own, where, depth)
        if kind == "string":
            self._bound(own, ("pattern",), where, str)
            return StringNode(min_length=self._count(own, "minLength", where),
                              max_length=self._count(own, "maxLength", where),
                              enum=self._enum(own, where, str))
        if kind in ("integer", "number"):
            check = is_json_int if kind == "integer" else is_json_number
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                        "multipleOf"):
                if key in own and not is_json_number(own[key]):
                    raise self.refuse(where, f"{key} that is not a number")
            return NumberNode(integer=kind == "integer", minimum=own.get("minimum"),
                              maximum=own.get("maximum"),
                              exclusive_minimum=own.get("exclusiveMinimum"),
                              exclusive_maximum=own.get("exclusiveMaximum"),
                              enum=self._enum(own, where, check))
        if kind == "boolean":
            return BooleanNode(enum=self._enum(own, where, bool))
        if kind == "array":
            self._bound(own, ("uniqueItems",), where, bool)
            if "items" not in own:
                raise self.refuse(where, "an array without items")
            if depth + 1 > MAX_DEPTH:
                raise self.refuse(where, f"nesting deeper than {MAX_DEPTH}")
            items = self.compile(own["items"], (*where, "items"), depth + 1)
            return ArrayNode(items=items, min_items=self._count(own, "minItems", where),
                             max_items=self._count(own, "maxItems", where))
        return NullNode()

    def _object(self, own: dict[str, Any], where: tuple[str, ...], depth: int) -> ObjectNode:
        extra = own.get("additionalProperties", True)
        if not isinstance(extra, bool):
            raise self.refuse(where, "additionalProperties as a schema")
        props = own.get("properties", {})
        if not isinstance(props, dict):
            raise self.refuse(where, "properties that is not an object")
        if props and depth + 1 > MAX_DEPTH:
            raise self.refuse(where, f"nesting deeper than {MAX_DEPTH}")
        nodes: dict[str, Node] = {}
        for name, sub in props.items():
            if PROPERTY.fullmatch(name) is None:
                raise self.refuse(where, "a property name outside [A-Za-z0-9_-]{1,64}")
            nodes[name] = self.compile(sub, (*where, "properties", name), depth + 1)
        required = own.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required) \
                or len(set(required)) != len(required):
            raise self.refuse(where, "required that is not an array of distinct names")
        for name in required:
            if name not in nodes:
                raise self.refuse(where, "a required name not in properties")
        return ObjectNode(properties=nodes, required=frozenset(required),
                          min_properties=self._count(own, "minProperties", where),
                          max_properties=self._count(own, "maxProperties", where))

    def _count(self, own: Mapping[str, Any], key: str, where: tuple[str, ...]) -> int | None:
        if key not in own:
            return None
        value = own[key]
        if not is_json_int(value) or value < 0:
            raise self.refuse(where, f"{key} that is not a non-negative integer")
        return int(value)

    def _bound(self, own: Mapping[str, Any], keys: tuple[str, ...], where: tuple[str, ...],
               kind: type) -> None:
        for key in keys:
            if key in own and type(own[key]) is not kind:
                raise self.refuse(where, f"{key} of the wrong type")

    def _enum(self, own: Mapping[str, Any], where: tuple[str, ...], check: Any) -> Any:
        if "enum" in own and "const" in own:
            raise self.refuse(where, "both enum and const")
        if "const" in own:
            values = [own["const"]]
        elif "enum" in own:
            values = own["enum"]
            if not isinstance(values, list) or not values or len(values) > MAX_ENUM:
                raise self.refuse(where, f"an enum that is not 1..{MAX_ENUM} values")
        else:
            return None
        ok = (lambda v: type(v) is check) if isinstance(check, type) else check
        for position, value in enumerate(values):
            if not ok(value):
                raise self.refuse(where, "an enum value not of the node's type")
            if any(json_equal(value, other) for other in values[:position]):
                raise self.refuse(where, "an enum with a duplicate")
        return tuple(values)


def compile_schema(schema: Any) -> ObjectNode | Opaque:
    """A pinned `inputSchema` -> its root `ObjectNode`, or `Opaque` with the reason."""
    try:
        size = len(canonical_bytes(schema))
    except DecodeError as exc:
        return Opaque(reason=f"/: not strictly decoded JSON ({exc.message})")
    if size > MAX_SCHEMA_BYTES:
        return Opaque(reason=f"/: over {MAX_SCHEMA_BYTES} bytes in canonical form")
    if not isinstance(schema, dict):
        return Opaque(reason="/: the root is not the object form")
    compiler = _Compiler(schema)
    try:
        node = compiler.compile(schema, (), 0, root=True)
    except _Refuse as exc:
        return Opaque(reason=exc.message)
    except RecursionError:
        return Opaque(reason="/: nested too deeply")
    if not isinstance(node, ObjectNode):
        return Opaque(reason="/: the root is not the object form")
    return node
