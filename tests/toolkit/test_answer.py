"""Fitting answers into output_max_bytes: always fits, never a cut JSON, the longest prefix."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.toolkit._answer import Encoding, encode_answer, fit_content, fit_items, ok
from boxmaker.toolkit._errors import ToolError


def _build(size: int) -> Any:
    def build(content: str, encoding: Encoding, truncated: bool) -> dict[str, Any]:
        return ok({"content": content, "encoding": encoding, "bytes": size, "truncated": truncated})

    return build


def _overhead() -> int:
    return len(encode_answer(_build(0)("", "utf-8", True)))


@settings(max_examples=150, deadline=None)
@given(
    data=st.one_of(
        st.text(alphabet=st.characters(codec="utf-8"), max_size=300).map(str.encode),
        st.binary(max_size=300),
    ),
    slack=st.integers(min_value=0, max_value=500),
)
def test_fits_the_cap_exactly_and_is_the_longest_prefix(data: bytes, slack: int) -> None:
    cap = _overhead() + 5 + slack
    out = fit_content(data, complete=True, cap=cap, build=_build(len(data)))
    assert len(out) <= cap
    answer = json.loads(out)["ok"]
    shown = (
        answer["content"].encode()
        if answer["encoding"] == "utf-8"
        else base64.b64decode(answer["content"])
    )
    assert data.startswith(shown)
    assert answer["bytes"] == len(data)
    assert answer["truncated"] == (shown != data)
    if answer["truncated"]:
        # One more unit (a character, or a byte for base64) would not fit
        # (with the whole content, the answer says truncated: false).
        if answer["encoding"] == "utf-8":
            longer = data.decode()[: len(answer["content"]) + 1]
            whole = longer == data.decode()
        else:
            longer = base64.b64encode(data[: len(shown) + 1]).decode()
            whole = len(shown) + 1 == len(data)
        bigger = _build(len(data))(longer, answer["encoding"], not whole)
        assert len(encode_answer(bigger)) > cap


def test_text_and_base64_are_chosen_by_content() -> None:
    text = json.loads(fit_content("héllo".encode(), complete=True, cap=1000, build=_build(6)))
    assert text["ok"]["encoding"] == "utf-8"
    assert text["ok"]["content"] == "héllo"
    binary = json.loads(fit_content(b"\xff\x00", complete=True, cap=1000, build=_build(2)))
    assert binary["ok"]["encoding"] == "base64"
    assert binary["ok"]["content"] == "/wA="


def test_a_prefix_cut_inside_a_character_is_still_text() -> None:
    data = "aé".encode()[:-1]  # the second byte of é is missing
    out = json.loads(fit_content(data, complete=False, cap=1000, build=_build(3)))["ok"]
    assert out == {"content": "a", "encoding": "utf-8", "bytes": 3, "truncated": True}


def test_escapes_count_against_the_cap() -> None:
    data = b'"\x01' * 100
    cap = _overhead() + 20
    out = fit_content(data, complete=True, cap=cap, build=_build(200))
    assert len(out) <= cap
    assert json.loads(out)["ok"]["truncated"] is True


def test_a_cap_below_the_frame_is_an_error() -> None:
    with pytest.raises(ToolError) as info:
        fit_content(b"abc", complete=True, cap=10, build=_build(3))
    assert info.value.code == "output_limit"


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=0, max_value=60), cap=st.integers(min_value=40, max_value=2000))
def test_items_fit_and_are_the_longest_prefix(count: int, cap: int) -> None:
    items = [{"name": "x" * i} for i in range(count)]

    def build(chosen: Sequence[dict[str, str]], truncated: bool) -> dict[str, Any]:
        return ok({"entries": list(chosen), "truncated": truncated})

    try:
        out = fit_items(items, complete=True, cap=cap, build=build)
    except ToolError:
        assert len(encode_answer(build([], True))) > cap
        return
    assert len(out) <= cap
    answer = json.loads(out)["ok"]
    n = len(answer["entries"])
    assert answer["entries"] == items[:n]
    assert answer["truncated"] == (n < count)
    if n < count:
        assert len(encode_answer(build(items[: n + 1], n + 1 < count))) > cap
