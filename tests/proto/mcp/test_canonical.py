"""canonical(v) as 12 defines it, and how it differs from RFC 8785 (JCS).

12's form is Python's json.dumps with ensure_ascii, sorted keys and compact
separators; the vectors below are 12's own ("1e2 is pinned as 100.0 and 1 stays
1") and RFC 8785's published examples, where both agree and where they differ.
"""

from __future__ import annotations

import hashlib

import pytest

from boxmaker.proto._errors import DecodeError
from boxmaker.proto._json import loads_value
from boxmaker.proto.mcp._canonical import (
    canonical_bytes,
    canonical_sha256,
    canonical_text,
    check_value,
    sha256_hex,
)


def c(text: str) -> str:
    return canonical_text(loads_value(text))


def test_the_specs_own_examples() -> None:
    assert c("1e2") == "100.0"
    assert c("1") == "1"
    assert c('{"b": 1, "a": [true, null, 1.5]}') == '{"a":[true,null,1.5],"b":1}'
    assert c('"caf\u00e9 \U0001f600"') == '"caf\\u00e9 \\ud83d\\ude00"'


def test_keys_sort_by_code_point_at_every_depth() -> None:
    assert c('{"z": {"y": 1, "x": 2}, "a": 0}') == '{"a":0,"z":{"x":2,"y":1}}'
    # RFC 8785 3.2.3 sorts by UTF-16 code units: U+FB33 after U+1F600 there; code points here
    assert c('{"\ufb33": 1, "\U0001f600": 2}') == '{"\\ufb33":1,"\\ud83d\\ude00":2}'


def test_rfc8785_number_vectors_where_the_forms_differ() -> None:
    """RFC 8785 appendix B writes these as ECMAScript does; 12's form is Python's repr."""
    expected = {  # JSON text: (JCS, 12)
        "1e2": ("100", "100.0"),
        "1E-7": ("1e-7", "1e-07"),
        "4.50": ("4.5", "4.5"),
        "2e-3": ("0.002", "0.002"),
        "0.000001": ("0.000001", "1e-06"),
        "1e21": ("1e+21", "1e+21"),
        "-0.0": ("0", "-0.0"),
        "9007199254740993": ("9007199254740992", "9007199254740993"),
    }
    for text, (_jcs, ours) in expected.items():
        assert c(text) == ours, text


def test_rfc8785_section_3_2_2_example_in_our_form() -> None:
    text = ('{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
            ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
            ' "literals": [null, true, false]}')
    assert c(text) == (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')


def test_the_hash_is_over_the_ascii_bytes() -> None:
    value = {"name": "git_log", "inputSchema": {}}
    assert canonical_bytes(value) == b'{"inputSchema":{},"name":"git_log"}'
    assert canonical_sha256(value) == hashlib.sha256(canonical_bytes(value)).hexdigest()
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.mark.parametrize("value", [
    float("nan"), float("inf"), {"a": "\ud800"}, {1: 2}, 10 ** 400, (1, 2), b"x",
])
def test_values_the_strict_decoder_never_yields_are_refused(value: object) -> None:
    with pytest.raises(DecodeError):
        canonical_text(value)


def test_depth_is_bounded_at_64() -> None:
    deep: object = 1
    for _ in range(64):
        deep = [deep]
    check_value(deep)
    with pytest.raises(DecodeError):
        check_value([deep])
