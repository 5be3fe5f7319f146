"""The profile: a table of accepted and refused schemas (pydantic's and zod's output too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boxmaker.proto.mcp._nodes import (
    ArrayNode,
    BooleanNode,
    NullableNode,
    NumberNode,
    ObjectNode,
    Opaque,
    StringNode,
)
from boxmaker.proto.mcp._profile import compile_schema
from tests.conftest import REPO


def obj(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, **extra}


def test_mcp_server_time_schemas_as_served_are_inside() -> None:
    lines = (REPO / "fixtures" / "mcp" / "time-legacy.jsonl").read_text().splitlines()
    tools = json.loads(lines[1])["result"]["tools"]
    for tool in tools:
        node = compile_schema(tool["inputSchema"])
        assert isinstance(node, ObjectNode), node
        assert all(isinstance(p, StringNode) for p in node.properties.values())


PYDANTIC_FETCH = {  # mcp-server-fetch's Fetch model, as pydantic writes it
    "description": "Parameters for fetching a URL.",
    "properties": {
        "url": {"description": "URL to fetch", "format": "uri", "minLength": 1,
                "title": "Url", "type": "string"},
        "max_length": {"default": 5000, "description": "Maximum number of characters.",
                       "exclusiveMaximum": 1000000, "exclusiveMinimum": 0,
                       "title": "Max Length", "type": "integer"},
        "start_index": {"default": 0, "minimum": 0, "title": "Start Index",
                        "type": "integer"},
        "raw": {"default": False, "title": "Raw", "type": "boolean"},
    },
    "required": ["url"], "title": "Fetch", "type": "object"}

PYDANTIC_GIT = {  # Optional[str] = None, a list with minItems, an enum through $defs
    "$defs": {"Mode": {"enum": ["soft", "hard"], "title": "Mode", "type": "string"}},
    "properties": {
        "repo_path": {"title": "Repo Path", "type": "string"},
        "files": {"items": {"type": "string"}, "minItems": 1, "title": "Files",
                  "type": "array"},
        "start_timestamp": {"anyOf": [{"type": "string"}, {"type": "null"}],
                            "default": None, "title": "Start Timestamp"},
        "mode": {"$ref": "#/$defs/Mode", "default": "soft"},
    },
    "required": ["repo_path", "files"], "title": "GitAdd", "type": "object"}

ZOD_TS = {  # zod-to-json-schema for the TypeScript SDK
    "type": "object",
    "properties": {"path": {"type": "string", "description": "a path"},
                   "depth": {"type": "number", "default": 2},
                   "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
                   "kind": {"type": "string", "enum": ["a", "b"]},
                   "opts": {"type": "object", "properties": {"x": {"type": "boolean"}},
                            "additionalProperties": False}},
    "required": ["path"], "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#"}


def test_pydantic_and_zod_outputs_are_inside() -> None:
    fetch = compile_schema(PYDANTIC_FETCH)
    assert isinstance(fetch, ObjectNode)
    assert fetch.properties["max_length"] == NumberNode(
        integer=True, exclusive_minimum=0, exclusive_maximum=1000000, default=5000)
    assert fetch.properties["raw"] == BooleanNode(default=False)
    git = compile_schema(PYDANTIC_GIT)
    assert isinstance(git, ObjectNode)
    assert git.properties["start_timestamp"] == NullableNode(inner=StringNode(), default=None)
    assert git.properties["mode"] == StringNode(enum=("soft", "hard"), default="soft")
    assert git.properties["files"] == ArrayNode(items=StringNode(), min_items=1)
    assert git.required == frozenset({"repo_path", "files"})
    ts = compile_schema(ZOD_TS)
    assert isinstance(ts, ObjectNode)
    assert isinstance(ts.properties["opts"], ObjectNode)


ACCEPTED = [
    obj({}),
    {"type": "object"},
    obj({"a": {"type": ["string", "null"]}}),
    obj({"a": {"type": ["null", "integer"], "minimum": 1}}),
    obj({"a": {"oneOf": [{"type": "null"}, {"type": "boolean"}]}}),
    obj({"a": {"allOf": [{"type": "string"}], "default": "x"}}),
    obj({"a": {"const": "only"}}),
    obj({"a": {"type": "integer", "const": 3}}),
    obj({"a": {"type": "number", "enum": [1, 2.5]}}),
    obj({"a": {"type": "string", "pattern": "^x", "format": "date", "x-ui": {"w": 1}}}),
    obj({"a": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}),
    obj({"a": {"type": "integer", "multipleOf": 3}}),
    {"$schema": "https://json-schema.org/draft/2020-12/schema", **obj({})},
    {"definitions": {"D": {"type": "string"}}, **obj({"a": {"$ref": "#/definitions/D"}})},
    obj({"a": obj({"b": obj({"c": {"type": "string"}})})}, minProperties=0, maxProperties=3),
    obj({}, additionalProperties=True),
    obj({"a": {"type": "object", "properties": {}, "default": {}}}),
]


@pytest.mark.parametrize("schema", ACCEPTED, ids=[str(i) for i in range(len(ACCEPTED))])
def test_accepted(schema: dict[str, Any]) -> None:
    assert isinstance(compile_schema(schema), ObjectNode), compile_schema(schema)


def nest(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        node = obj({"a": node})
    return node


REFUSED: list[tuple[Any, str]] = [
    (True, "root is not the object form"),
    ({}, "allows anything"),
    ({"type": "string"}, "root is not the object form"),
    ([], "root"),
    (obj({"a": True}), "true, false"),
    (obj({"a": {}}), "allows anything"),
    (obj({"a": {"title": "only an annotation"}}), "allows anything"),
    (obj({"a": {"not": {"type": "string"}}}), "no form"),
    (obj({"a": {"type": "string", "not": {}}}), "keyword not"),
    (obj({"a": {"if": {}, "then": {}, "type": "string"}}), "keyword if"),
    (obj({}, dependentRequired={}), "keyword dependentRequired"),
    (obj({}, patternProperties={}), "keyword patternProperties"),
    (obj({}, propertyNames={}), "keyword propertyNames"),
    (obj({}, additionalProperties={"type": "string"}), "additionalProperties as a schema"),
    (obj({}, unevaluatedProperties=False), "keyword unevaluatedProperties"),
    (obj({"a": {"type": "array", "prefixItems": []}}), "keyword prefixItems"),
    (obj({"a": {"type": "array", "items": [{"type": "string"}]}}), "not an object"),
    (obj({"a": {"type": "array"}}), "without items"),
    (obj({"a": {"type": "array", "items": {"type": "string"}, "contains": {}}}), "contains"),
    (obj({}, **{"$id": "x"}), "keyword $id"),
    (obj({"a": {"$ref": "https://example.com/s"}}), "$ref that is not"),
    (obj({"a": {"$ref": "#/$defs/missing"}}), "not there"),
    ({"$defs": {"A": {"$ref": "#/$defs/A"}}, **obj({"a": {"$ref": "#/$defs/A"}})}, "cycle"),
    (obj({"a b": {"type": "string"}}), "property name"),
    (obj({"a": {"type": "string"}}, required=["b"]), "required name not in properties"),
    (obj({"a": {"type": "string"}}, required=["a", "a"]), "distinct"),
    (obj({"a": {"enum": list(range(257)), "type": "integer"}}), "1..256"),
    (obj({"a": {"enum": ["x", "x"]}}), "duplicate"),
    (obj({"a": {"type": "integer", "enum": [1, 1.0]}}), "not of the node's type"),
    (obj({"a": {"type": "integer", "enum": [True]}}), "not of the node's type"),
    (obj({"a": {"enum": ["x", 1]}}), "not of the node's type"),
    (obj({"a": {"type": "number", "exclusiveMinimum": True}}), "not a number"),
    (obj({"a": {"type": "string", "maxLength": -1}}), "non-negative"),
    (obj({"a": {"type": "string", "maxLength": 1.0}}), "non-negative"),
    (obj({"a": {"type": "integer", "default": "5"}}), "default that does not validate"),
    (obj({"a": {"type": "integer", "minimum": 1, "default": 0}}), "default"),
    (obj({"a": {"type": "integer", "default": 1.0}}), "default"),
    (nest(9), "deeper than 8"),
    (obj({"a": {"type": "null"}}), "null node outside"),
    (obj({"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}), "exactly one null"),
    (obj({"a": {"anyOf": [{"type": "string"}]}}), "two nodes"),
    (obj({"a": {"type": ["string", "integer"]}}), "type list"),
    (obj({"a": {"type": ["null", "null"]}}), "type list"),
    (obj({"a": {"allOf": [{"type": "string"}, {"type": "string"}]}}), "exactly one"),
    (obj({"a": {"$ref": "#/$defs/D", "type": "string"}}), "beside reference"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", **obj({})}, "$schema"),
    (obj({"a": {"$defs": {}, "type": "string"}}), "$defs below the root"),
    (obj({"a": {"type": "string", "items": {}}}), "keyword items"),
    (obj({"a": {"type": "object", "properties": {}, "unknown": 1}}), "keyword unknown"),
    (obj({"a": {"enum": ["x"], "const": "x"}}), "both enum and const"),
]


@pytest.mark.parametrize(("schema", "fragment"), REFUSED,
                         ids=[str(i) for i in range(len(REFUSED))])
def test_refused_schemas_make_the_tool_opaque(schema: Any, fragment: str) -> None:
    found = compile_schema(schema)
    assert isinstance(found, Opaque), found
    assert fragment in found.reason, found.reason


def test_the_reason_names_the_pointer() -> None:
    found = compile_schema(obj({"outer": obj({"x~/y": {"type": "string"}})}))
    assert isinstance(found, Opaque)
    assert found.reason.startswith("/properties/outer: a property name")


def test_the_depth_is_eight() -> None:
    assert isinstance(compile_schema(nest(8)), ObjectNode)


def test_more_than_512_nodes_after_resolution() -> None:
    defs = {"S": obj({f"p{i}": {"type": "string"} for i in range(40)})}
    props = {f"r{i}": {"$ref": "#/$defs/S"} for i in range(13)}  # 1 + 13 * 41 = 534
    found = compile_schema({"$defs": defs, **obj(props)})
    assert isinstance(found, Opaque) and "512" in found.reason
    props = {f"r{i}": {"$ref": "#/$defs/S"} for i in range(12)}  # 1 + 12 * 41 = 493
    assert isinstance(compile_schema({"$defs": defs, **obj(props)}), ObjectNode)


def test_over_64_kib_in_canonical_form() -> None:
    found = compile_schema(obj({"a": {"type": "string", "description": "x" * 70000}}))
    assert isinstance(found, Opaque) and "65536 bytes" in found.reason


def test_a_value_the_strict_decoder_never_yields() -> None:
    found = compile_schema(obj({"a": {"type": "number", "maximum": float("nan")}}))
    assert isinstance(found, Opaque) and "strictly decoded" in found.reason


def test_fixture_path_is_real() -> None:
    assert Path(REPO / "fixtures" / "mcp" / "time-modern.jsonl").is_file()
