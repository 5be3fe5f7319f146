"""The nodes' helpers: JSON equality by type and value, pointers."""

from __future__ import annotations

from boxmaker.proto.mcp._nodes import (
    NO_DEFAULT,
    StringNode,
    is_json_int,
    is_json_number,
    json_equal,
    pointer,
)


def test_json_equality_tells_1_from_1_0_from_true() -> None:
    assert json_equal(1, 1) and json_equal({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not json_equal(1, 1.0) and not json_equal(1, True) and not json_equal(0, False)
    assert not json_equal([1], [1.0]) and not json_equal({"a": 1}, {"b": 1})
    assert not json_equal([1], [1, 2])


def test_numbers_and_pointers() -> None:
    assert is_json_int(3) and not is_json_int(True) and not is_json_int(3.0)
    assert is_json_number(3.5) and not is_json_number(False)
    assert pointer(()) == "/" and pointer(("a", "0")) == "/a/0"
    assert pointer(("a/b", "c~d")) == "/a~1b/c~0d"


def test_defaults() -> None:
    assert not StringNode().has_default and StringNode(default=None).has_default
    assert repr(NO_DEFAULT) == "NO_DEFAULT"
