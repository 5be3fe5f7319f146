"""`parse_args`: strict structure, the one optional field, the grammars, the limits."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.proto._convert import structure, unstructure
from boxmaker.proto.tools import (
    CATALOGUE,
    MAX_WRITE_CONTENT_BYTES,
    ArgsError,
    EchoArgs,
    HttpFetchArgs,
    ListDirArgs,
    ReadFileArgs,
    WriteFileArgs,
    parse_args,
)

GOOD: list[tuple[str, dict[str, Any], object]] = [
    ("read_file", {"path": "/home/me/notes/todo.md"}, ReadFileArgs(path="/home/me/notes/todo.md")),
    ("list_dir", {"path": "/home/me/notes"}, ListDirArgs(path="/home/me/notes")),
    ("write_file", {"path": "/home/me/x", "content": "", "mode": "create"},
     WriteFileArgs(path="/home/me/x", content="", mode="create")),
    ("write_file", {"path": "/home/me/x", "content": "hi", "mode": "replace"},
     WriteFileArgs(path="/home/me/x", content="hi", mode="replace")),
    ("write_file", {"path": "/home/me/x", "content": "hi", "mode": "append"},
     WriteFileArgs(path="/home/me/x", content="hi", mode="append")),
    ("http_fetch", {"url": "https://docs.python.org/3/"},
     HttpFetchArgs(url="https://docs.python.org/3/", method="GET")),
    ("http_fetch", {"url": "https://docs.python.org/3/", "method": "HEAD"},
     HttpFetchArgs(url="https://docs.python.org/3/", method="HEAD")),
    ("echo", {"text": "hello\nworld \u202e"}, EchoArgs(text="hello\nworld \u202e")),
]


@pytest.mark.parametrize(("tool", "args", "typed"), GOOD)
def test_good_arguments(tool: str, args: dict[str, Any], typed: object) -> None:
    parsed = parse_args(tool, args)
    assert parsed.args == typed
    if tool in ("read_file", "list_dir", "write_file"):
        assert parsed.path == args["path"]
        assert parsed.url is None
    elif tool == "http_fetch":
        assert parsed.url is not None
        assert parsed.url.text == args["url"]
    # round trip: the JSON form has every field, the default method included
    again = parsed.as_json()
    assert structure(again, type(typed)) == typed
    if tool == "http_fetch":
        assert again["method"] == args.get("method", "GET")


BAD: list[tuple[str, Any, str]] = [
    ("read_file", {}, "required field \"path\""),
    ("read_file", {"path": "/a", "extra": 1}, "unknown field \"extra\""),
    ("read_file", {"path": 5}, "expected a string"),
    ("read_file", {"path": None}, "expected a string"),
    ("read_file", {"path": ["/a"]}, "expected a string"),
    ("read_file", {"path": "a/b"}, "path grammar"),
    ("read_file", {"path": "/a/../b"}, "path grammar"),
    ("read_file", {"path": "/a/"}, "path grammar"),
    ("list_dir", {"path": "/"}, "path grammar"),
    ("list_dir", {"path": "/a\x00"}, "path grammar"),
    ("write_file", {"path": "/a", "content": "x"}, "required field \"mode\""),
    ("write_file", {"path": "/a", "content": "x", "mode": "overwrite"}, "expected one of"),
    ("write_file", {"path": "/a", "content": "x", "mode": "CREATE"}, "expected one of"),
    ("write_file", {"path": "/a", "content": b"x", "mode": "create"}, "expected a string"),
    ("write_file", {"path": "/a", "content": 5, "mode": "create"}, "expected a string"),
    ("write_file", {"path": "/a", "content": "x\ud800", "mode": "create"}, "UTF-8"),
    ("write_file", {"path": "/a", "content": "x" * (MAX_WRITE_CONTENT_BYTES + 1),
                    "mode": "create"}, "1 MiB"),
    ("write_file", {"path": "/a", "content": "\u00e9" * (MAX_WRITE_CONTENT_BYTES // 2 + 1),
                    "mode": "create"}, "1 MiB"),
    ("http_fetch", {}, "required field \"url\""),
    ("http_fetch", {"url": "https://a.example", "method": "POST"}, "expected one of"),
    ("http_fetch", {"url": "https://a.example", "method": "get"}, "expected one of"),
    ("http_fetch", {"url": "https://a.example", "method": None}, "expected one of"),
    ("http_fetch", {"url": "https://a.example", "headers": {}}, "unknown field"),
    ("http_fetch", {"url": "https://127.0.0.1/"}, "url: host grammar"),
    ("http_fetch", {"url": "https://user@a.example/"}, "userinfo"),
    ("http_fetch", {"url": "https://a.example/#x"}, "fragment"),
    ("echo", {"text": 1}, "expected a string"),
    ("echo", {"text": "x", "y": "z"}, "unknown field"),
    ("echo", [], "expected a JSON object"),
    ("echo", "text", "expected a JSON object"),
]


@pytest.mark.parametrize(("tool", "args", "says"), BAD)
def test_bad_arguments(tool: str, args: Any, says: str) -> None:
    with pytest.raises(ArgsError) as info:
        parse_args(tool, args)
    assert says in str(info.value)


def test_content_limit_is_one_mebibyte_of_utf8() -> None:
    exact = {"path": "/a", "content": "x" * MAX_WRITE_CONTENT_BYTES, "mode": "append"}
    assert parse_args("write_file", exact).args == WriteFileArgs(**exact)
    two_byte = "\u00e9" * (MAX_WRITE_CONTENT_BYTES // 2)
    assert parse_args("write_file", {"path": "/a", "content": two_byte, "mode": "create"})


def test_every_tool_has_an_argument_class() -> None:
    assert set(CATALOGUE.names) == {
        "read_file", "list_dir", "write_file", "http_fetch", "echo", "run_command"}
    for tool in CATALOGUE.names:
        with pytest.raises(ArgsError):
            parse_args(tool, {"no_such_field": True})


def test_unknown_tool_is_the_callers_bug() -> None:
    with pytest.raises(ValueError, match="not a tool"):
        parse_args("shell", {})


def test_method_is_the_only_optional_field() -> None:
    assert unstructure(HttpFetchArgs(url="https://a.example")) == {
        "url": "https://a.example",
        "method": "GET",
    }
    for tool, required in [("read_file", {"path": "/a"}), ("list_dir", {"path": "/a"}),
                           ("write_file", {"path": "/a", "content": "", "mode": "create"}),
                           ("echo", {"text": ""})]:
        for field in required:
            partial = {k: v for k, v in required.items() if k != field}
            with pytest.raises(ArgsError, match="required field"):
                parse_args(tool, partial)


def test_a_tools_own_parser_is_used_and_its_kinds_still_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from boxmaker.proto.tools import Arg, Catalogue, Tool, _parse

    def parse(args: Any) -> ReadFileArgs:
        if set(args) != {"where"}:
            raise ArgsError("arguments of peek: where only")
        return ReadFileArgs(path=args["where"])

    tool = Tool(name="peek", summary="s", args=(Arg(name="path", kind="path"),),
                args_class=None, parser=parse, result=(), runs_on="files", approval="args",
                entries="paths", reads=True, untrusted=False, description="d")
    monkeypatch.setattr(_parse, "CATALOGUE", Catalogue((tool,)))
    assert parse_args("peek", {"where": "/a"}).path == "/a"
    with pytest.raises(ArgsError, match="where only"):
        parse_args("peek", {"path": "/a"})
    with pytest.raises(ArgsError, match="path grammar"):
        parse_args("peek", {"where": "a/b"})
