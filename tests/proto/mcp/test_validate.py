"""Checking values against profiled nodes: types without coercion, bounds, closed objects."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto.mcp._nodes import ObjectNode
from boxmaker.proto.mcp._profile import compile_schema
from boxmaker.proto.mcp._validate import ArgumentError, check, value_problem

SCHEMA = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "minLength": 2, "maxLength": 3},
        "i": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
        "n": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 2},
        "b": {"type": "boolean"},
        "e": {"enum": ["x", "y"]},
        "c": {"type": "integer", "const": 1},
        "a": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "o": {"type": "object", "properties": {"z": {"type": "string", "default": "zz"}},
              "required": []},
        "ns": {"type": ["string", "null"]},
        "p": {"type": "string", "pattern": "^never$", "format": "email"},
        "big": {"type": "array", "items": {"type": "integer"}},
    },
    "minProperties": 1, "maxProperties": 6,
}


def root() -> ObjectNode:
    node = compile_schema(SCHEMA)
    assert isinstance(node, ObjectNode)
    return node


@pytest.mark.parametrize("value", [
    {"s": "ab"}, {"i": 0}, {"i": 9}, {"n": 2}, {"n": 0.51}, {"b": False}, {"e": "y"}, {"c": 1},
    {"a": ["x"]}, {"o": {}}, {"ns": None}, {"ns": "x"}, {"p": "anything: not evaluated"},
    {"s": "\U0001f600\U0001f600"},  # code points, not bytes
])
def test_valid(value: dict[str, Any]) -> None:
    assert check(root(), value, (), fill=False) == value


@pytest.mark.parametrize(("value", "where", "rule"), [
    ({"s": "a"}, "/s", "minLength"), ({"s": "abcd"}, "/s", "maxLength"),
    ({"s": 1}, "/s", "type"), ({"i": 1.0}, "/i", "type"), ({"i": True}, "/i", "type"),
    ({"i": -1}, "/i", "minimum"), ({"i": 10}, "/i", "exclusiveMaximum"),
    ({"n": 0.5}, "/n", "exclusiveMinimum"), ({"n": 2.0000001}, "/n", "maximum"),
    ({"n": True}, "/n", "type"), ({"b": 0}, "/b", "type"), ({"e": "z"}, "/e", "enum"),
    ({"c": 1.0}, "/c", "type"), ({"c": True}, "/c", "type"),
    ({"a": []}, "/a", "minItems"), ({"a": ["x", "y", "z"]}, "/a", "maxItems"),
    ({"a": [1]}, "/a/0", "type"), ({"o": {"q": 1}}, "/o/q", "additionalProperties"),
    ({"zz": 1}, "/zz", "additionalProperties"), ({}, "/", "minProperties"),
    ({"s": "ab", "i": 1, "n": 1, "b": True, "e": "x", "c": 1, "ns": None}, "/",
     "maxProperties"),
    ({"big": list(range(1025))}, "/big", "maxItems"), ({"ns": 3}, "/ns", "type"),
])
def test_invalid(value: dict[str, Any], where: str, rule: str) -> None:
    with pytest.raises(ArgumentError) as caught:
        check(root(), value, (), fill=False)
    assert (caught.value.path, caught.value.rule) == (where, rule)
    assert "expected" in caught.value.message


def test_exact_comparison_of_large_integers() -> None:
    node = compile_schema({"type": "object", "properties": {
        "i": {"type": "integer", "maximum": 9007199254740992}}})
    assert isinstance(node, ObjectNode)
    check(node, {"i": 9007199254740992}, (), fill=False)
    with pytest.raises(ArgumentError):
        check(node, {"i": 9007199254740993}, (), fill=False)


def test_required_and_filling() -> None:
    node = compile_schema({"type": "object", "required": ["r"], "properties": {
        "r": {"type": "string"}, "d": {"type": "integer", "default": 5}}})
    assert isinstance(node, ObjectNode)
    problem = value_problem(node, {}, ())
    assert problem is not None and (problem.pointer, problem.rule) == ("/r", "required")
    assert check(node, {"r": "x"}, (), fill=True) == {"r": "x", "d": 5}
    assert check(node, {"r": "x"}, (), fill=False) == {"r": "x"}
