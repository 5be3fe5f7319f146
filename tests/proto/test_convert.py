"""The strict converter (boxmaker.proto._convert): no coercion, no unknown keys."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._convert import (
    U64,
    U64_MAX,
    InvalidValue,
    JsonObject,
    decode,
    encode,
    register_structure_hook,
    register_tagged_union,
    structure,
    unstructure,
)
from boxmaker.proto._errors import DecodeError


@attrs.frozen(kw_only=True)
class Leaf:
    word: Literal["alpha", "beta"]
    count: int
    size: U64
    ratio: float
    flag: bool
    note: str | None


@attrs.frozen(kw_only=True)
class Empty:
    pass


@attrs.frozen(kw_only=True)
class Allowed:
    pass


@attrs.frozen(kw_only=True)
class Ask:
    grant: str


@attrs.frozen(kw_only=True)
class Refusal:
    code: str


Outcome = Allowed | Ask | Refusal
register_tagged_union(Outcome, {"allowed": Allowed, "ask": Ask, "denied": Refusal})


def _check_short(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if len(value) > 3:
        raise InvalidValue(f"{attribute.name} is longer than 3 characters")


@attrs.frozen(kw_only=True)
class Short:
    text: str = attrs.field(validator=_check_short)


@attrs.frozen(kw_only=True)
class Root:
    leaf: Leaf
    leaves: list[Leaf]
    table: dict[str, int]
    empty: Empty
    outcome: Outcome
    maybe: Outcome | None
    args: JsonObject
    shorts: list[Short]
    optional: int = 0


LEAF: dict[str, Any] = {
    "word": "alpha",
    "count": -3,
    "size": 7,
    "ratio": 0.5,
    "flag": True,
    "note": None,
}


def _root(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "leaf": dict(LEAF),
        "leaves": [dict(LEAF), dict(LEAF)],
        "table": {"a": 1},
        "empty": {},
        "outcome": {"allowed": {}},
        "maybe": None,
        "args": {"free": {"form": [1]}},
        "shorts": [{"text": "abc"}],
    }
    value.update(changes)
    return value


def _leaf(**changes: Any) -> dict[str, Any]:
    return {**LEAF, **changes}


def _refused(value: Any, cls: Any = Root) -> DecodeError:
    with pytest.raises(DecodeError) as caught:
        structure(value, cls)
    return caught.value


def test_valid_value_structures_and_round_trips() -> None:
    root = structure(_root(), Root)
    assert root.leaf.word == "alpha"
    assert root.outcome == Allowed()
    assert root.optional == 0
    again = unstructure(root)
    assert again == {**_root(), "optional": 0}
    assert decode(encode(root), Root) == root


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("count", True, "expected an integer, found a boolean"),
        ("count", 1.0, "expected an integer, found a number"),
        ("count", "5", "expected an integer, found a string"),
        ("count", None, "expected an integer, found null"),
        ("size", False, "found a boolean"),
        ("size", 1.0, "found a number"),
        ("size", -1, "out of the range"),
        ("size", U64_MAX + 1, "out of the range"),
        ("ratio", "0.5", "expected a number, found a string"),
        ("ratio", True, "expected a number, found a boolean"),
        ("flag", 1, "expected a boolean, found an integer"),
        ("flag", "true", "expected a boolean, found a string"),
        ("flag", None, "expected a boolean, found null"),
        ("note", 5, "expected a string, found an integer"),
        ("note", ["x"], "expected a string, found an array"),
        ("word", "Alpha", 'expected one of "alpha", "beta"'),
        ("word", "gamma", "expected one of"),
        ("word", 1, "expected one of"),
    ],
)
def test_no_coercion(field: str, value: Any, message: str) -> None:
    error = _refused(_root(leaf=_leaf(**{field: value})))
    assert message in error.message
    assert error.path == f"$.leaf.{field}"


def test_u64_bounds() -> None:
    assert structure(_leaf(size=0), Leaf).size == 0
    assert structure(_leaf(size=U64_MAX), Leaf).size == 2**64 - 1
    assert U64_MAX == 18446744073709551615


def test_float_takes_an_integer() -> None:
    leaf = structure(_leaf(ratio=2), Leaf)
    assert leaf.ratio == 2.0 and type(leaf.ratio) is float


def test_literal_bool_is_not_int() -> None:
    @attrs.frozen(kw_only=True)
    class Versioned:
        v: Literal[1]

    assert structure({"v": 1}, Versioned).v == 1
    for bad in (True, 1.0, "1", 2):
        assert "expected one of 1" in _refused({"v": bad}, Versioned).message


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"zz": 1}, "$"),
        ({"leaf": _leaf(zz=1)}, "$.leaf"),
        ({"leaves": [dict(LEAF), _leaf(zz=1)]}, "$.leaves[1]"),
        ({"empty": {"x": 1}}, "$.empty"),
        ({"outcome": {"allowed": {"x": 1}}}, "$.outcome.allowed"),
        ({"outcome": {"ask": {"grant": "g", "x": 1}}}, "$.outcome.ask"),
        ({"maybe": {"denied": {"code": "c", "x": 1}}}, "$.maybe.denied"),
        ({"shorts": [{"text": "a", "x": 1}]}, "$.shorts[0]"),
    ],
)
def test_unknown_keys_at_every_depth(changes: dict[str, Any], path: str) -> None:
    error = _refused(_root(**changes))
    assert error.message.startswith("unknown field")
    assert error.path == path


def test_unknown_key_is_quoted_escaped() -> None:
    error = _refused(_root(empty={"\x1b[31mred": 1}))
    assert "\x1b" not in str(error)
    assert "\\u001b" in str(error)


@pytest.mark.parametrize(
    ("value", "path", "missing"),
    [
        ({k: v for k, v in _root().items() if k != "args"}, "$", "args"),
        (_root(leaf={k: v for k, v in LEAF.items() if k != "note"}), "$.leaf", "note"),
        (_root(outcome={"ask": {}}), "$.outcome.ask", "grant"),
        (_root(leaves=[{k: v for k, v in LEAF.items() if k != "count"}]), "$.leaves[0]", "count"),
    ],
)
def test_required_fields(value: dict[str, Any], path: str, missing: str) -> None:
    error = _refused(value)
    assert error.message == f'required field "{missing}" is missing'
    assert error.path == path


def test_nullable_field_must_still_be_present() -> None:
    """Every field is always present; null is how a value is absent."""
    error = _refused(_root(leaf={k: v for k, v in LEAF.items() if k != "note"}))
    assert "note" in error.message


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"leaves": "abc"}, "$.leaves", "expected an array, found a string"),
        ({"leaves": {"0": LEAF}}, "$.leaves", "expected an array, found an object"),
        ({"leaves": None}, "$.leaves", "expected an array, found null"),
        ({"leaves": [dict(LEAF), 5]}, "$.leaves[1]", "expected an object, found an integer"),
        ({"table": []}, "$.table", "expected an object, found an array"),
        ({"table": {"a": "1"}}, "$.table.a", "expected an integer"),
        ({"table": {"a b": True}}, '$.table["a b"]', "expected an integer"),
        ({"leaf": None}, "$.leaf", "expected an object, found null"),
        ({"leaf": "x"}, "$.leaf", "expected an object, found a string"),
        ({"empty": None}, "$.empty", "expected an object, found null"),
        ({"empty": []}, "$.empty", "expected an object, found an array"),
        ({"args": None}, "$.args", "expected an object, found null"),
        ({"args": []}, "$.args", "expected an object, found an array"),
        ({"args": "{}"}, "$.args", "expected an object, found a string"),
    ],
)
def test_wrong_container_types(changes: dict[str, Any], path: str, message: str) -> None:
    error = _refused(_root(**changes))
    assert message in error.message
    assert error.path == path


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        ({}, "exactly one key"),
        ({"allowed": {}, "ask": {"grant": "g"}}, "exactly one key"),
        ({"allow": {}}, "unknown tag"),
        (None, "expected a tagged object, found null"),
        ("allowed", "expected a tagged object, found a string"),
        ([{"allowed": {}}], "expected a tagged object, found an array"),
        ({"allowed": None}, "expected an object, found null"),
        ({"allowed": []}, "expected an object, found an array"),
    ],
)
def test_tagged_unions(outcome: Any, message: str) -> None:
    error = _refused(_root(outcome=outcome))
    assert message in error.message


def test_tagged_union_structures_each_member() -> None:
    assert structure(_root(outcome={"ask": {"grant": "g"}}), Root).outcome == Ask(grant="g")
    root = structure(_root(maybe={"denied": {"code": "c"}}), Root)
    assert root.maybe == Refusal(code="c")
    assert unstructure(root)["maybe"] == {"denied": {"code": "c"}}
    assert unstructure(structure(_root(), Root))["maybe"] is None


def test_optional_field_with_default() -> None:
    assert structure(_root(optional=5), Root).optional == 5
    assert "expected an integer" in _refused(_root(optional=None)).message


def test_json_object_is_kept_as_is() -> None:
    args = {"a": [1, {"b": None}], "c": 1.5}
    root = structure(_root(args=args), Root)
    assert root.args == args


def test_validator_failure_is_a_decode_error_with_a_path() -> None:
    error = _refused(_root(shorts=[{"text": "abc"}, {"text": "abcd"}]))
    assert error.message == "text is longer than 3 characters"
    assert error.path == "$.shorts[1]"
    # built by our own code, the same rule is a ValueError, not the peer's fault
    with pytest.raises(ValueError) as caught:
        Short(text="abcd")
    assert not isinstance(caught.value, DecodeError)


def test_decode_checks_the_json_text_first() -> None:
    with pytest.raises(DecodeError, match="duplicate key"):
        decode(b'{"word":"alpha","word":"beta"}', Leaf)
    with pytest.raises(DecodeError, match="expected a JSON object"):
        decode(b"[]", Leaf)


def test_top_level_type_errors() -> None:
    assert _refused([], Leaf).message == "expected an object, found an array"
    assert _refused(None, Leaf).path == "$"


@settings(max_examples=100)
@given(
    count=st.integers(min_value=-(2**80), max_value=2**80),
    size=st.integers(min_value=0, max_value=U64_MAX),
    ratio=st.floats(allow_nan=False, allow_infinity=False),
    flag=st.booleans(),
    note=st.none() | st.text(max_size=20),
    word=st.sampled_from(["alpha", "beta"]),
)
def test_leaf_round_trip(
    count: int, size: int, ratio: float, flag: bool, note: str | None, word: str
) -> None:
    leaf = structure(
        {"word": word, "count": count, "size": size, "ratio": ratio, "flag": flag, "note": note},
        Leaf,
    )
    assert decode(encode(leaf), Leaf) == leaf


@settings(max_examples=100)
@given(st.one_of(st.booleans(), st.floats(), st.text(max_size=3), st.none(), st.lists(st.none())))
def test_nothing_but_an_int_is_an_int(value: Any) -> None:
    with pytest.raises(DecodeError):
        structure(_leaf(count=value), Leaf)


# -- a converter bug is a bug, not bad input (issue 12) ----------------------------------------


class _Buggy:
    """A type whose structure hook has a bug (it fails on any input)."""


def _buggy_hook(value: Any, _: Any) -> _Buggy:
    return value.no_such_attribute  # type: ignore[no-any-return]


register_structure_hook(_Buggy, _buggy_hook)


@attrs.frozen(kw_only=True)
class WithBug:
    count: int
    buggy: _Buggy


def test_a_hook_bug_is_raised_as_it_is_not_reported_as_bad_input() -> None:
    with pytest.raises(AttributeError, match="no_such_attribute"):
        structure({"count": 1, "buggy": 5}, WithBug)


def test_a_hook_bug_next_to_bad_input_is_still_raised() -> None:
    """The fast pass stops at the bad count; the detailed pass meets the bug too."""
    with pytest.raises(AttributeError, match="no_such_attribute"):
        structure({"count": "1", "buggy": 5}, WithBug)


def test_bad_input_next_to_good_input_is_still_a_decode_error() -> None:
    with pytest.raises(DecodeError) as caught:
        structure({"count": "1"}, Leaf)
    assert caught.value.path is not None
