"""The argument classes: their JSON form has every field, defaults filled in."""

from __future__ import annotations

from boxmaker.proto._convert import structure
from boxmaker.proto.tools import HttpFetchArgs, ParsedArgs, ReadFileArgs


def test_as_json_fills_the_default_and_round_trips() -> None:
    parsed = ParsedArgs(args=HttpFetchArgs(url="https://a.example/"), path=None, url=None)
    assert parsed.as_json() == {"url": "https://a.example/", "method": "GET"}
    again = ParsedArgs(args=ReadFileArgs(path="/a"), path="/a", url=None).as_json()
    assert again == {"path": "/a"} and structure(again, ReadFileArgs) == ReadFileArgs(path="/a")
