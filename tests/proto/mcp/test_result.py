"""The projection of a result: only 12's fields, unknown blocks omitted, always within bounds."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto.mcp._result import project, project_block

PNG = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def test_every_block_kind_of_12() -> None:
    result = {
        "content": [
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}, "_meta": {}},
            {"type": "image", "data": PNG, "mimeType": "image/png", "extra": 1},
            {"type": "resource_link", "uri": "file:///x", "name": "x"},
            {"type": "resource", "resource": {"uri": "file:///y", "mimeType": "text/plain",
                                              "text": "why"}},
            {"type": "audio", "data": base64.b64encode(b"a" * 40).decode(),
             "mimeType": "audio/wav"},
            {"type": "hologram", "x": 1},
        ],
        "structuredContent": {"a": [1, None]}, "isError": False, "resultType": "complete",
        "_meta": {"m": 1}}
    assert project(result, line_bytes=812, output_max_bytes=65536) == {
        "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "mime_type": "image/png", "data_b64": PNG, "bytes": 100},
            {"type": "resource_link", "uri": "file:///x", "name": "x", "mime_type": None},
            {"type": "resource", "uri": "file:///y", "mime_type": "text/plain", "text": "why",
             "blob_b64": None},
            {"type": "omitted", "kind": "audio", "bytes": 40},
            {"type": "omitted", "kind": "hologram", "bytes": len('{"type":"hologram","x":1}')},
        ],
        "structured": {"a": [1, None]}, "is_error": False, "truncated": False, "bytes": 812}


@pytest.mark.parametrize("block", [
    {"type": "text"}, {"type": "text", "text": 3}, {"type": "image", "data": "!!",
                                                    "mimeType": "image/png"},
    {"type": "image", "data": PNG}, {"type": "resource_link", "uri": "x"},
    {"type": "resource", "resource": {"uri": "u", "text": "t", "blob": "AA=="}},
    {"type": "resource", "resource": {"uri": "u", "blob": "not base64!"}}, "text", 3,
    {"type": 5},
])
def test_malformed_blocks_are_omitted(block: Any) -> None:
    assert project_block(block)["type"] == "omitted"


def test_is_error_and_absent_fields() -> None:
    assert project({"isError": True}, line_bytes=1, output_max_bytes=4096) == {
        "content": [], "structured": None, "is_error": True, "truncated": False, "bytes": 1}
    assert project({"content": "x", "isError": "yes"}, line_bytes=1,
                   output_max_bytes=4096)["is_error"] is False


def test_structured_goes_first() -> None:
    result = {"content": [{"type": "text", "text": "short"}],
              "structuredContent": {"big": "x" * 5000}}
    out = project(result, line_bytes=9000, output_max_bytes=4096)
    assert out["structured"] is None and out["truncated"] is True
    assert out["content"] == [{"type": "text", "text": "short"}]


def test_text_is_cut_at_a_code_point_and_later_blocks_omitted() -> None:
    result = {"content": [{"type": "text", "text": "\U0001f600" * 3000},
                          {"type": "text", "text": "later"},
                          {"type": "image", "data": PNG, "mimeType": "image/png"}]}
    out = project(result, line_bytes=1, output_max_bytes=4096)
    assert size(out) <= 4096 and out["truncated"]
    first = out["content"][0]["text"]
    assert set(first) == {"\U0001f600"} and len(first) > 900
    assert out["content"][1:] == [{"type": "omitted", "kind": "text", "bytes": 5},
                                  {"type": "omitted", "kind": "image", "bytes": 100}]


def test_many_small_blocks_become_one_marker() -> None:
    result = {"content": [{"type": "text", "text": "x" * 100} for _ in range(500)]}
    out = project(result, line_bytes=1, output_max_bytes=4096)
    assert size(out) <= 4096 and out["truncated"]
    assert out["content"][-1]["type"] == "omitted"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=3000)),
    st.builds(lambda n: {"type": "image", "data": base64.b64encode(b"x" * n).decode(),
                         "mimeType": "image/png"}, st.integers(0, 3000)),
    st.builds(lambda t: {"type": "resource", "resource": {"uri": "u", "text": t}},
              st.text(max_size=2000)),
    st.just({"type": "audio"}),
), max_size=40), st.integers(4096, 12000))
def test_the_projection_always_fits(blocks: list[Any], limit: int) -> None:
    out = project({"content": blocks, "structuredContent": ["s" * 100]}, line_bytes=1,
                  output_max_bytes=limit)
    assert size(out) <= limit
    assert len(out["content"]) <= len(blocks)
