"""The lines brokerd writes (byte for byte as 12 gives them) and strict reading."""

from __future__ import annotations

import pytest

from boxmaker.proto.mcp._lines import (
    INITIALIZED_LINE,
    LineViolation,
    Notification,
    Request,
    Response,
    RpcError,
    call_line,
    cancel_line,
    discover_line,
    initialize_line,
    list_line,
    ping_answer,
    read_message,
    refusal_answer,
    shown_method,
)

META = ('{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":'
        '{"name":"boxmaker","version":"0.9.1"},"io.modelcontextprotocol/protocolVersion":'
        '"2026-07-28"}')


def test_the_lines_of_12_byte_for_byte() -> None:
    assert discover_line("0.9.1") == (
        '{"id":"bx-discover","jsonrpc":"2.0","method":"server/discover","params":{"_meta":'
        + META + "}}").encode()
    assert initialize_line("2025-11-25", "0.9.1") == (
        b'{"id":"bx-init","jsonrpc":"2.0","method":"initialize","params":{"capabilities":{},'
        b'"clientInfo":{"name":"boxmaker","version":"0.9.1"},"protocolVersion":"2025-11-25"}}')
    assert INITIALIZED_LINE == b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert list_line(1, None, None) == (
        b'{"id":"bx-list-1","jsonrpc":"2.0","method":"tools/list","params":{}}')
    assert list_line(2, "c2", "0.9.1") == (
        '{"id":"bx-list-2","jsonrpc":"2.0","method":"tools/list","params":{"_meta":' + META
        + ',"cursor":"c2"}}').encode()
    assert call_line(20411, "git_log", {"repo_path": "/r", "max_count": 10}, None) == (
        b'{"id":"bx-call-20411","jsonrpc":"2.0","method":"tools/call","params":{"arguments":'
        b'{"max_count":10,"repo_path":"/r"},"name":"git_log"}}')
    assert call_line(7, "t", {}, "0.9.1") == (
        '{"id":"bx-call-7","jsonrpc":"2.0","method":"tools/call","params":{"_meta":' + META
        + ',"arguments":{},"name":"t"}}').encode()
    assert cancel_line(7) == (
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"timeout",'
        b'"requestId":"bx-call-7"}}')
    assert ping_answer(3) == b'{"id":3,"jsonrpc":"2.0","result":{}}'
    assert refusal_answer("s1") == (
        b'{"error":{"code":-32601,"message":"boxmaker provides no client features"},'
        b'"id":"s1","jsonrpc":"2.0"}')


def test_non_ascii_arguments_are_escaped_in_the_line() -> None:
    assert b"\\u00e9" in call_line(1, "t", {"q": "\u00e9"}, None)


def test_reading_the_three_kinds() -> None:
    assert read_message(b'{"jsonrpc":"2.0","id":"bx-list-1","result":{"tools":[]}}') == \
        Response(id="bx-list-1", result={"tools": []}, error=None)
    assert read_message(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}') \
        == Response(id=None, result=None, error=RpcError(code=-32700, message="x"))
    assert read_message(b'{"jsonrpc":"2.0","id":5,"method":"ping"}') == \
        Request(id=5, method="ping", params=None)
    assert read_message(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}') \
        == Notification(method="notifications/progress", params={})


@pytest.mark.parametrize(("line", "fragment"), [
    (b"[]", "batch"),
    (b'[{"jsonrpc":"2.0","method":"x"}]', "batch"),
    (b'"x"', "expected a JSON object"),
    (b"Server started on stdio", "not strict JSON"),
    (b'{"jsonrpc":"2.0","id":"a","id":"b","result":{}}', "duplicate key"),
    (b'{"jsonrpc":"2.0","id":"a","result":{"t":"\\ud800"}}', "lone surrogate"),
    (b'{"jsonrpc":"2.0","id":"a","result":{"n":NaN}}', "NaN"),
    (b"\xff", "UTF-8"),
    (b'{"id":"a","result":{}}', "jsonrpc"),
    (b'{"jsonrpc":"1.0","id":"a","result":{}}', "jsonrpc"),
    (b'{"jsonrpc":"2.0","id":"a","result":{},"error":{"code":1,"message":"m"}}', "exactly one"),
    (b'{"jsonrpc":"2.0","id":"a"}', "exactly one"),
    (b'{"jsonrpc":"2.0","result":{}}', "without an id"),
    (b'{"jsonrpc":"2.0","id":"a","result":[]}', "result: expected an object"),
    (b'{"jsonrpc":"2.0","id":"a","result":{},"extra":1}', "member other than"),
    (b'{"jsonrpc":"2.0","id":true,"result":{}}', "id: expected"),
    (b'{"jsonrpc":"2.0","id":1.5,"result":{}}', "id: expected"),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', "id: expected"),
    (b'{"jsonrpc":"2.0","method":3}', "method: expected"),
    (b'{"jsonrpc":"2.0","method":"x","params":[1]}', "params: expected an object"),
    (b'{"jsonrpc":"2.0","id":"a","error":{"code":"1","message":"m"}}', "integer code"),
    (b'{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m","x":1}}', "member other"),
    (b'{"jsonrpc":"2.0","method":"x","id":1,"extra":{}}', "member other than"),
])
def test_violations(line: bytes, fragment: str) -> None:
    with pytest.raises(LineViolation, match=fragment):
        read_message(line)


def test_shown_methods_are_cut() -> None:
    assert shown_method("sampling/createMessage") == "sampling/createMessage"
    assert len(shown_method("x" * 1000)) == 131
