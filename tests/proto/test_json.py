"""Strict JSON text (boxmaker.proto._json): every rule of 02-wire "Framing"."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto._errors import DecodeError
from boxmaker.proto._json import (
    MAX_DEPTH,
    canonical,
    dumps,
    dumps_bytes,
    loads_object,
    loads_value,
    type_word,
)
from tests.conftest import examples


def _nested(depth: int) -> str:
    """An object `depth` levels deep: objects and arrays alternating."""
    text = "1"
    for level in range(depth - 1, -1, -1):
        text = f'{{"k":{text}}}' if level % 2 == 0 else f"[{text}]"
    return text


def test_plain_object() -> None:
    assert loads_object(b'{"a":[1,2.5,"x",true,false,null,{}]}') == {
        "a": [1, 2.5, "x", True, False, None, {}]
    }
    assert loads_object('{"a": 1}') == {"a": 1}


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',
        '{"a":1,"b":{"c":1,"c":1}}',
        '{"a":[{"x":1},{"y":2,"y":3}]}',
        '{"a":{"b":{"c":{"d":{"e":1,"e":1}}}}}',
        '{"a":1,"\\u0061":2}',  # the same key once unescaped
    ],
)
def test_duplicate_keys_at_any_depth(text: str) -> None:
    with pytest.raises(DecodeError, match="duplicate key"):
        loads_object(text)


@pytest.mark.parametrize(
    "text", ['{"n":NaN}', '{"n":Infinity}', '{"n":-Infinity}', '{"n":[1,NaN]}', "NaN"]
)
def test_nan_and_infinity(text: str) -> None:
    with pytest.raises(DecodeError, match="not allowed"):
        loads_value(text)


@pytest.mark.parametrize("text", ['{"n":1e400}', '{"n":-1e400}', '{"n":[1.8e308]}'])
def test_numbers_that_overflow_to_infinity(text: str) -> None:
    with pytest.raises(DecodeError, match="too large"):
        loads_value(text)


def test_tiny_numbers_are_fine() -> None:
    assert loads_value("[1e-400, 5e-324]") == [0.0, 5e-324]


def test_huge_integer_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="too many digits"):
        loads_value("1" * 5000)
    assert loads_value("9" * 100) == int("9" * 100)


@pytest.mark.parametrize(
    "data",
    [b'{"a":"\xff"}', b'{"a":"\xc0\xaf"}', b'{"a":"\xe2\x82"}', b"\x80{}", b'{"\xfe":1}'],
)
def test_not_utf8(data: bytes) -> None:
    with pytest.raises(DecodeError, match="UTF-8"):
        loads_object(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"\xed\xa0\x80"}',  # U+D800 encoded raw
        b'{"a":"\xed\xbf\xbf"}',  # U+DFFF encoded raw
        b'{"\xed\xa0\x80":1}',
        b'{"a":"\xed\xa0\xbd\xed\xb8\x80"}',  # a surrogate pair in CESU-8
    ],
)
def test_raw_surrogates_are_not_utf8(data: bytes) -> None:
    with pytest.raises(DecodeError):
        loads_object(data)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"\\ud800"}',
        '{"a":"\\udfff"}',
        '{"a":"x\\ud83dy"}',
        '{"a":"\\ude00\\ud83d"}',
        '{"\\ud800":1}',
        '{"a":["\\udc00"]}',
        '{"a":{"b":"\\ud800"}}',
        '"\\ud800"',
    ],
)
def test_lone_surrogate_escapes(text: str) -> None:
    with pytest.raises(DecodeError, match="surrogate"):
        loads_value(text)


def test_lone_surrogate_in_a_str_input() -> None:
    with pytest.raises(DecodeError, match="surrogate"):
        loads_value('{"a":"\ud800"}')


def test_escaped_surrogate_pair_is_fine() -> None:
    assert loads_object('{"a":"\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    assert loads_object('{"a":"\U0001f600"}'.encode()) == {"a": "\U0001f600"}


def test_depth_64_accepted_65_refused() -> None:
    assert loads_object(_nested(MAX_DEPTH)) is not None
    with pytest.raises(DecodeError, match="deeper than 64"):
        loads_object(_nested(MAX_DEPTH + 1))
    assert MAX_DEPTH == 64


def test_depth_counts_arrays_and_objects_alike() -> None:
    only_arrays = "[" * 64 + "]" * 64
    assert loads_value(only_arrays) is not None
    with pytest.raises(DecodeError, match="deeper"):
        loads_value("[" * 65 + "]" * 65)
    with pytest.raises(DecodeError, match="deeper"):
        loads_value('{"a":' * 65 + "1" + "}" * 65)


def test_absurd_depth_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        loads_value("[" * 200_000 + "]" * 200_000)


@pytest.mark.parametrize("text", ["[]", "1", '"x"', "null", "true"])
def test_loads_object_needs_an_object(text: str) -> None:
    with pytest.raises(DecodeError, match="expected a JSON object"):
        loads_object(text)


@pytest.mark.parametrize(
    "text",
    ["", " ", "{", '{"a":1}x', '{"a":1} {}', "{'a':1}", '{"a":01}', '{"a":.5}', '{"a":1,}',
     '{"a":"\t"}', '{"a":"\n"}', "\ufeff{}", '{"a":+1}', '{"a":0x10}', "{/*c*/}"],
)  # fmt: skip
def test_not_json(text: str) -> None:
    with pytest.raises(DecodeError):
        loads_value(text)


def test_error_messages_do_not_echo_input() -> None:
    with pytest.raises(DecodeError) as caught:
        loads_value('{"a":"\x1b[2J' + "\x07" * 10 + "}")
    assert "\x1b" not in str(caught.value)
    assert "\x07" not in str(caught.value)


def test_dumps_is_compact_and_refuses_nan() -> None:
    assert dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert dumps({"a": "é"}, ascii_only=True) == '{"a":"\\u00e9"}'
    assert dumps({"b": 1, "a": 2}, sort_keys=True) == '{"a":2,"b":1}'
    assert dumps_bytes({"a": "é"}) == '{"a":"é"}'.encode()
    with pytest.raises(ValueError):
        dumps({"a": math.nan})
    with pytest.raises(ValueError):
        dumps({"a": math.inf})


def test_canonical_sorts_every_level() -> None:
    value = {"b": [{"z": 1, "y": 2}], "a": {"d": 1, "c": 2}}
    assert json.dumps(canonical(value)) == '{"a": {"c": 2, "d": 1}, "b": [{"y": 2, "z": 1}]}'


@pytest.mark.parametrize(
    ("value", "word"),
    [(None, "null"), (True, "a boolean"), (1, "an integer"), (1.0, "a number"),
     ("", "a string"), ([], "an array"), ({}, "an object")],
)  # fmt: skip
def test_type_word(value: object, word: str) -> None:
    assert type_word(value) == word


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(200))
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_round_trip(value: dict[str, object]) -> None:
    assert loads_object(dumps_bytes(value)) == value
    assert loads_object(dumps(value, ascii_only=True)) == value
