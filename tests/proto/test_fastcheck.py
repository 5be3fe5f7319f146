"""The compiled checkers (boxmaker/proto/_fastcheck.py) against their authority,
the strict converter: whatever a checker accepts, the converter accepts as the
same value; what the converter refuses, the checker refuses too."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._convert import U64, U64_MAX, JsonObject, register_tagged_union, structure
from boxmaker.proto._errors import DecodeError
from boxmaker.proto._fastcheck import Mismatch, compile_checkers
from boxmaker.proto.audit._audit import Declassify
from tests.conftest import examples


@attrs.frozen(kw_only=True)
class Leaf:
    count: U64
    name: str


@attrs.frozen(kw_only=True)
class Other:
    flag: bool


Tagged = Leaf | Other
register_tagged_union(Tagged, {"leaf": Leaf, "other": Other})


@attrs.frozen(kw_only=True)
class Outer:
    seq: U64
    word: Literal["allowed", "denied"]
    note: str | None
    args: JsonObject
    inner: Leaf
    choice: Tagged
    maybe: Leaf | None
    last: bool


CHECKERS = compile_checkers({"outer": Outer, "leaf": Leaf},
                            tagged={Tagged: {"leaf": Leaf, "other": Other}}, json_names={})
FAST = CHECKERS["outer"]

GOOD: dict[str, Any] = {
    "seq": 7, "word": "allowed", "note": None, "args": {"k": [1]},
    "inner": {"count": 0, "name": ""}, "choice": {"other": {"flag": True}},
    "maybe": {"count": U64_MAX, "name": "x"}, "last": False,
}


def _strict(value: Any) -> Outer | None:
    try:
        result: Outer = structure(value, Outer)
        return result
    except DecodeError:
        return None


def test_a_good_value_is_built_as_the_converter_builds_it() -> None:
    fast = FAST(GOOD)
    assert isinstance(fast, Outer)
    assert fast == _strict(GOOD)
    assert fast.last is False and fast.choice == Other(flag=True)
    assert CHECKERS["leaf"]({"count": 3, "name": "n"}) == Leaf(count=U64(3), name="n")


@pytest.mark.parametrize(("field", "bad"), [
    ("seq", -1), ("seq", U64_MAX + 1), ("seq", True), ("seq", 1.0), ("seq", "1"),
    ("word", "ask"), ("word", 1), ("note", 3), ("args", []), ("args", None),
    ("inner", {"count": 1}), ("inner", {"count": 1, "name": "n", "extra": 1}),
    ("choice", {"leaf": {"count": 1, "name": "n"}, "other": {"flag": True}}),
    ("choice", {"nope": {}}), ("choice", {}), ("maybe", {"count": 1, "name": 2}),
    ("last", 0),
])
def test_each_wrong_field_is_refused_by_both(field: str, bad: Any) -> None:
    value = dict(GOOD, **{field: bad})
    with pytest.raises((Mismatch, KeyError)):
        FAST(value)
    assert _strict(value) is None


def test_missing_and_extra_keys_are_refused() -> None:
    missing = {k: v for k, v in GOOD.items() if k != "note"}
    extra = dict(GOOD, surprise=1)
    for value in (missing, extra, [], None, "x"):
        with pytest.raises((Mismatch, KeyError)):
            FAST(value)
        assert _strict(value) is None


def test_a_json_name_that_differs_from_the_field_name() -> None:
    check = compile_checkers({"declassify": Declassify}, tagged={},
                             json_names={(Declassify, "from_"): "from"})["declassify"]
    value = {"session": "s-1", "from": {"label": "secret", "untrusted": True},
             "to": {"label": "public", "untrusted": False}, "by": 1000, "reason": "ok"}
    assert check(value) == structure(value, Declassify)
    with pytest.raises((Mismatch, KeyError)):
        check({("from_" if k == "from" else k): v for k, v in value.items()})


json_leaf = (st.none() | st.booleans() | st.integers(-2, U64_MAX + 2) | st.floats(allow_nan=False)
             | st.sampled_from(["allowed", "denied", "ask", "", "n"]))
json_value: Any = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=2)
    | st.dictionaries(st.sampled_from(["count", "name", "flag", "leaf", "other", "x"]), inner,
                      max_size=3),
    max_leaves=6)


def _mutations() -> st.SearchStrategy[dict[str, Any]]:
    keys = sorted(GOOD)
    return st.fixed_dictionaries(
        {},
        optional={key: json_value for key in keys} | {"extra": json_value},
    ).map(
        lambda changes: {**GOOD, **changes})


@settings(max_examples=examples(400), deadline=None)
@given(value=_mutations() | st.dictionaries(st.sampled_from(sorted(GOOD)), json_value))
def test_the_checker_never_accepts_what_the_converter_refuses(value: dict[str, Any]) -> None:
    try:
        fast = FAST(value)
    except (Mismatch, KeyError):
        return
    assert fast == _strict(value)
