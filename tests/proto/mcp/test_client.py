"""The sans-IO MCP client: both eras, every hostile behaviour 12 lists, the line hashes.

The server's side is written here line by line (and, for the reference server,
replayed from lines `mcp-server-time` 2026.10.19 wrote: fixtures/mcp/).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.proto.mcp._client import (
    MAX_NOTICES,
    TRANSITIONS,
    CallAnswered,
    CallFailed,
    CallTimedOut,
    ClientStateError,
    EraDecided,
    Listed,
    McpClient,
    Output,
    RequestRefused,
    State,
    Unavailable,
    Write,
    max_line_bytes,
)
from boxmaker.proto.mcp._lines import (
    INITIALIZED_LINE,
    call_line,
    discover_line,
    initialize_line,
    list_line,
)
from tests.conftest import REPO

V = "0.9.1"
TOOL = {"name": "t", "description": "d", "inputSchema": {"type": "object"}}


def enc(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


def ok(id_: Any, result: dict[str, Any]) -> bytes:
    return enc({"jsonrpc": "2.0", "id": id_, "result": result})


def err(id_: Any, code: int, message: str = "no") -> bytes:
    return enc({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}})


def writes(outputs: list[Output]) -> list[bytes]:
    return [o.line for o in outputs if isinstance(o, Write)]


def others(outputs: list[Output]) -> list[Output]:
    return [o for o in outputs if not isinstance(o, Write)]


def client(protocol: Any = "2025-11-25") -> McpClient:
    return McpClient(protocol=protocol, version=V, output_max_bytes=4096)


def legacy_ready(tools: list[Any] | None = None) -> McpClient:
    c = client()
    assert writes(c.start()) == [initialize_line("2025-11-25", V)]
    out = c.receive_data(ok("bx-init", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "serverInfo": {"name": "s", "version": "1"}}))
    assert writes(out) == [INITIALIZED_LINE, list_line(1, None, None)]
    out = c.receive_data(ok("bx-list-1", {"tools": tools if tools is not None else [TOOL]}))
    assert isinstance(others(out)[0], Listed)
    assert c.state is State.READY
    return c


def calling() -> McpClient:
    c = legacy_ready()
    c.send_call(9, "t", {})
    return c


# -- the reference server, replayed --------------------------------------------------------


def fixture_lines(name: str) -> list[bytes]:
    return (REPO / "fixtures" / "mcp" / name).read_bytes().splitlines(keepends=True)


def test_mcp_server_time_modern_era_replayed() -> None:
    served = fixture_lines("time-modern.jsonl")
    c = client("auto")
    assert writes(c.start()) == [discover_line(V)]
    out = c.receive_data(served[0])
    assert others(out) == [EraDecided(era="modern")]
    assert writes(out) == [list_line(1, None, V)]
    listed = others(c.receive_data(served[1]))[0]
    assert isinstance(listed, Listed) and listed.protocol == "2026-07-28"
    assert [t["name"] for t in listed.tools] == ["get_current_time", "convert_time"]
    assert listed.server_info is not None and listed.server_info.name == "mcp-time"
    assert c.modern and c.state is State.READY


def test_mcp_server_time_legacy_era_replayed_serves_the_same_tools() -> None:
    modern = json.loads(fixture_lines("time-modern.jsonl")[1])["result"]["tools"]
    served = fixture_lines("time-legacy.jsonl")
    c = client("auto-legacy")
    c.start()
    c.receive_data(served[0])
    listed = others(c.receive_data(served[1]))[0]
    assert isinstance(listed, Listed) and listed.protocol == "2025-11-25"
    assert list(listed.tools) == modern
    assert listed.server_info is not None and listed.server_info.version == "2026.10.19"


# -- negotiation ----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    err("bx-discover", -32601, "Method not found"),
    err(None, -32700, "Parse error"),
    ok("bx-discover", {"something": "else"}),
    ok("other", {}),
    b"Starting the server...\n",
])
def test_anything_but_a_modern_discover_answer_is_legacy(answer: bytes) -> None:
    c = client("auto")
    c.start()
    assert others(c.receive_data(answer)) == [EraDecided(era="legacy")]
    assert c.state is State.CLOSED
    assert c.receive_data(ok("bx-discover", {"supportedVersions": ["2026-07-28"]})) == []


def test_silence_to_discover_is_legacy_and_a_late_answer_is_never_read() -> None:
    c = client("auto")
    c.start()
    assert c.discover_timed_out() == [EraDecided(era="legacy")]
    assert c.receive_data(ok("bx-discover", {"supportedVersions": ["2026-07-28"]})) == []
    assert c.discover_timed_out() == []


def test_an_exit_during_discover_is_legacy() -> None:
    c = client("auto")
    c.start()
    assert c.receive_eof() == [EraDecided(era="legacy")]


@pytest.mark.parametrize("code", [-32022, -32021, -32020])
def test_a_modern_error_means_no_common_version_and_no_fallback(code: int) -> None:
    c = client("auto")
    c.start()
    out = others(c.receive_data(err("bx-discover", code)))
    assert len(out) == 1 and isinstance(out[0], Unavailable)
    assert "no common protocol version" in out[0].reason


def test_a_modern_server_without_our_version() -> None:
    c = client("auto")
    c.start()
    out = c.receive_data(ok("bx-discover", {"supportedVersions": ["2027-01-01"]}))
    assert others(out) == [EraDecided(era="legacy")]


@pytest.mark.parametrize(("choice", "answer", "fine"), [
    ("2025-11-25", "2025-11-25", True), ("2025-11-25", "2025-06-18", False),
    ("2025-06-18", "2025-06-18", True), ("2025-06-18", "2025-11-25", False),
    ("auto-legacy", "2025-06-18", True), ("auto-legacy", "2025-11-25", True),
    ("auto-legacy", "2025-03-26", False), ("auto-legacy", "2024-11-05", False),
])
def test_initialize_must_name_the_version(choice: Any, answer: str, fine: bool) -> None:
    c = client(choice)
    offered = writes(c.start())[0]
    assert json.loads(offered)["params"]["protocolVersion"] == (
        "2025-11-25" if choice == "auto-legacy" else choice)
    out = c.receive_data(ok("bx-init", {"protocolVersion": answer}))
    if fine:
        assert writes(out)[0] == INITIALIZED_LINE and c.protocol == answer
    else:
        assert isinstance(others(out)[0], Unavailable) and c.state is State.CLOSED


def test_a_pinned_modern_server_is_listed_with_meta_and_no_probe() -> None:
    c = client("2026-07-28")
    assert writes(c.start()) == [list_line(1, None, V)]
    out = c.receive_data(ok("bx-list-1", {"tools": [TOOL], "ttlMs": 0, "cacheScope": "x",
                                          "_meta": {"io.modelcontextprotocol/serverInfo":
                                                    {"name": "n", "version": "v"}}}))
    listed = others(out)[0]
    assert isinstance(listed, Listed) and listed.server_info is not None
    line = writes(c.send_call(1, "t", {}))[0]
    assert line == call_line(1, "t", {}, V)


def test_an_initialize_error() -> None:
    c = client()
    c.start()
    out = others(c.receive_data(err("bx-init", -32603)))
    assert out == [Unavailable(reason="initialize: the server answered error -32603")]


# -- listing --------------------------------------------------------------------------------


def test_pages_follow_the_cursor() -> None:
    c = client()
    c.start()
    c.receive_data(ok("bx-init", {"protocolVersion": "2025-11-25"}))
    out = c.receive_data(ok("bx-list-1", {"tools": [TOOL], "nextCursor": "p2"}))
    assert writes(out) == [list_line(2, "p2", None)]
    out = c.receive_data(ok("bx-list-2", {"tools": [{**TOOL, "name": "u"}]}))
    listed = others(out)[0]
    assert isinstance(listed, Listed) and listed.pages == 2 and len(listed.tools) == 2


def start_listing() -> McpClient:
    c = client()
    c.start()
    c.receive_data(ok("bx-init", {"protocolVersion": "2025-11-25"}))
    return c


def test_at_most_64_pages() -> None:
    c = start_listing()
    for page in range(1, 64):
        out = c.receive_data(ok(f"bx-list-{page}", {"tools": [], "nextCursor": "again"}))
        assert writes(out) == [list_line(page + 1, "again", None)]
    out = others(c.receive_data(ok("bx-list-64", {"tools": [], "nextCursor": "again"})))
    assert isinstance(out[0], Unavailable) and "64 pages" in out[0].reason


@pytest.mark.parametrize(("result", "fragment"), [
    ({"tools": [TOOL] * 1025}, "1024 tools"),
    ({"tools": [], "nextCursor": "c" * 1025}, "nextCursor"),
    ({"tools": [], "nextCursor": 3}, "nextCursor"),
    ({"tools": {}}, "not an array"),
    ({}, "not an array"),
])
def test_list_bounds(result: dict[str, Any], fragment: str) -> None:
    c = start_listing()
    out = others(c.receive_data(ok("bx-list-1", result)))
    assert isinstance(out[0], Unavailable) and fragment in out[0].reason
    assert out[0].protocol_violation


def test_at_most_4_mib_of_list_lines() -> None:
    c = McpClient(protocol="2025-11-25", version=V, output_max_bytes=8 * 1024 * 1024)
    c.start()
    c.receive_data(ok("bx-init", {"protocolVersion": "2025-11-25"}))
    big = [{"name": f"t{i}", "description": "x" * 1_100_000} for i in range(2)]
    c.receive_data(ok("bx-list-1", {"tools": big, "nextCursor": "2"}))
    out = others(c.receive_data(ok("bx-list-2", {"tools": big})))
    assert isinstance(out[0], Unavailable) and "4194304 bytes" in out[0].reason


def test_a_list_page_answered_twice_is_a_violation() -> None:
    c = start_listing()
    c.receive_data(ok("bx-list-1", {"tools": [], "nextCursor": "2"}))
    out = others(c.receive_data(ok("bx-list-1", {"tools": []})))
    assert isinstance(out[0], Unavailable) and "not outstanding" in out[0].reason


# -- the call -------------------------------------------------------------------------------


def test_the_call_and_its_hashes() -> None:
    c = legacy_ready()
    line = writes(c.send_call(20411, "t", {"b": 1, "a": "\u00e9"}))[0]
    assert line == call_line(20411, "t", {"a": "\u00e9", "b": 1}, None)
    assert c.request_sha256 == hashlib.sha256(line).hexdigest()
    answer = b'{"jsonrpc":"2.0","id":"bx-call-20411","result":{"content":[],"isError":true}}'
    out = others(c.receive_data(answer + b"\r\n"))
    assert out == [CallAnswered(result={"content": [], "isError": True}, is_error=True,
                                response_sha256=hashlib.sha256(answer + b"\r").hexdigest(),
                                bytes=len(answer) + 1)]
    assert c.response_sha256 == hashlib.sha256(answer + b"\r").hexdigest()
    assert c.state is State.DONE


def test_lines_split_anywhere_are_the_same_lines() -> None:
    c = calling()
    answer = ok("bx-call-9", {"content": [{"type": "text", "text": "hi"}]})
    out: list[Output] = []
    for byte in answer:
        out += c.receive_data(bytes([byte]))
    assert isinstance(others(out)[0], CallAnswered)


def test_an_answer_twice_counts_once_and_the_rest_is_discarded() -> None:
    c = calling()
    first = ok("bx-call-9", {"content": []})
    out = c.receive_data(first + ok("bx-call-9", {"content": [1]}) + b"noise\n")
    assert len(others(out)) == 1 and isinstance(others(out)[0], CallAnswered)
    assert c.receive_data(ok("bx-call-9", {})) == [] and c.receive_eof() == []


def test_an_answer_to_an_unknown_id() -> None:
    c = calling()
    out = others(c.receive_data(ok("bx-call-8", {"content": []})))
    assert out == [CallFailed(kind="protocol",
                              message="an answer to an id that is not outstanding")]
    c = legacy_ready()
    out = others(c.receive_data(ok(1, {})))
    assert isinstance(out[0], Unavailable) and out[0].protocol_violation


def test_a_json_rpc_error_to_the_call_is_cut_at_4096_bytes() -> None:
    c = calling()
    out = others(c.receive_data(err("bx-call-9", -32000, "\u00e9" * 3000)))
    failed = out[0]
    assert isinstance(failed, CallFailed) and failed.kind == "mcp_error"
    assert len(failed.message.encode()) == 4096 and failed.response_sha256 is not None


def test_input_required_ends_the_call() -> None:
    c = calling()
    out = others(c.receive_data(ok("bx-call-9", {"resultType": "input_required"})))
    assert isinstance(out[0], CallFailed) and out[0].kind == "input_required"


@pytest.mark.parametrize("result", [{"resultType": "partial"}, {"isError": "yes"}])
def test_a_result_not_of_the_protocol(result: dict[str, Any]) -> None:
    c = calling()
    out = others(c.receive_data(ok("bx-call-9", result)))
    assert isinstance(out[0], CallFailed) and out[0].kind == "protocol"


def test_a_timeout_cancels_and_a_late_answer_is_discarded() -> None:
    c = calling()
    out = c.call_timed_out()
    assert writes(out) == [b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":'
                           b'{"reason":"timeout","requestId":"bx-call-9"}}']
    assert others(out) == [CallTimedOut()]
    assert c.receive_data(ok("bx-call-9", {"content": []})) == []
    assert c.call_timed_out() == []


def test_exits_at_every_point() -> None:
    c = client()
    c.start()
    assert isinstance(c.receive_eof()[0], Unavailable)
    c = start_listing()
    assert isinstance(c.receive_eof()[0], Unavailable)
    c = legacy_ready()
    out = c.receive_eof()
    assert out == [Unavailable(reason="the server exited before the call line was written")]
    c = calling()
    assert c.receive_eof() == [CallFailed(kind="crashed",
                                          message="the server exited before it answered")]


def test_start_timeout() -> None:
    c = start_listing()
    assert isinstance(c.start_timed_out()[0], Unavailable) and c.state is State.CLOSED
    assert legacy_ready().start_timed_out() == []


# -- hostile lines -------------------------------------------------------------------------


HOSTILE = [
    b"some log line on stdout\n",
    b'{"jsonrpc":"2.0","id":"bx-call-9","id":"bx-call-9","result":{}}\n',
    b'{"jsonrpc":"2.0","id":"bx-call-9","result":{"t":"\\udc00"}}\n',
    b'[{"jsonrpc":"2.0","id":"bx-call-9","result":{}}]\n',
    b"\n",
    b'{"jsonrpc":"2.0","id":"bx-call-9","result":{"content":[]},"extra":true}\n',
]


@pytest.mark.parametrize("line", HOSTILE)
def test_hostile_lines_are_protocol_violations(line: bytes) -> None:
    c = calling()
    out = others(c.receive_data(line))
    assert len(out) == 1 and isinstance(out[0], CallFailed) and out[0].kind == "protocol"
    c = start_listing()
    out = others(c.receive_data(line))
    assert isinstance(out[0], Unavailable) and out[0].protocol_violation


def test_an_over_long_line() -> None:
    limit = max_line_bytes(4096)
    assert limit == 4 * 1024 * 1024 + 64 * 1024
    c = calling()
    out = others(c.receive_data(b"x" * (limit + 1)))  # no newline yet: refused at once
    assert out[0] == CallFailed(kind="output_too_large",
                                message=f"a line longer than {limit} bytes")
    c = calling()
    line = b'{"jsonrpc":"2.0","id":"bx-call-9","result":{"t":"' + b"x" * limit + b'"}}\n'
    assert isinstance(others(c.receive_data(line))[0], CallFailed)
    c = start_listing()
    out = others(c.receive_data(b"y" * (limit + 1) + b"\n"))
    assert isinstance(out[0], Unavailable)
    c = calling()
    exact = ok("bx-call-9", {"t": "x" * (limit - 60)})
    assert len(exact) - 1 <= limit
    assert isinstance(others(c.receive_data(exact))[0], CallAnswered)


@pytest.mark.parametrize("method", ["sampling/createMessage", "elicitation/create",
                                    "roots/list", "whatever/else"])
def test_server_requests_get_minus_32601_and_a_log_line(method: str) -> None:
    c = calling()
    out = c.receive_data(enc({"jsonrpc": "2.0", "id": "s1", "method": method, "params": {}}))
    assert writes(out) == [b'{"error":{"code":-32601,"message":"boxmaker provides no client '
                           b'features"},"id":"s1","jsonrpc":"2.0"}']
    assert others(out) == [RequestRefused(method=method)]
    assert c.state is State.CALLING


def test_a_legacy_ping_is_answered_a_modern_one_refused() -> None:
    c = calling()
    out = c.receive_data(enc({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
    assert out == [Write(line=b'{"id":7,"jsonrpc":"2.0","result":{}}')]
    c = client("2026-07-28")
    c.start()
    out = c.receive_data(enc({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
    assert others(out) == [RequestRefused(method="ping")]


def test_a_flood_of_notifications() -> None:
    c = calling()
    note = enc({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progress": 1}})
    assert c.receive_data(note * MAX_NOTICES) == []
    out = others(c.receive_data(note))
    assert out == [CallFailed(kind="protocol",
                              message=f"more than {MAX_NOTICES} notifications and requests")]


def test_list_changed_and_messages_are_ignored() -> None:
    c = calling()
    for method in ("notifications/tools/list_changed", "notifications/message",
                   "notifications/cancelled", "notifications/resources/list_changed"):
        assert c.receive_data(enc({"jsonrpc": "2.0", "method": method})) == []


# -- the table ------------------------------------------------------------------------------


def test_inputs_out_of_turn_are_our_bug() -> None:
    c = client()
    with pytest.raises(ClientStateError):
        c.send_call(1, "t", {})
    c.start()
    with pytest.raises(ClientStateError):
        c.send_call(1, "t", {})
    with pytest.raises(ClientStateError):
        client().receive_eof()
    c = calling()
    with pytest.raises(ClientStateError):
        c.send_call(2, "t", {})


def test_every_state_but_the_ends_has_a_way_out_and_the_ends_none() -> None:
    sources = {state for state, _ in TRANSITIONS}
    targets = set(TRANSITIONS.values())
    assert State.DONE not in sources and State.CLOSED not in sources
    assert sources | targets == set(State)


# -- properties -----------------------------------------------------------------------------

SESSION = (ok("bx-init", {"protocolVersion": "2025-11-25"})
           + enc({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
           + enc({"jsonrpc": "2.0", "id": 1, "method": "ping"})
           + ok("bx-list-1", {"tools": [TOOL], "nextCursor": "x"})
           + ok("bx-list-2", {"tools": [{**TOOL, "name": "u"}]}))


def run(chunks: list[bytes]) -> list[Output]:
    c = client()
    out = c.start()
    for chunk in chunks:
        out += c.receive_data(chunk)
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, len(SESSION)), max_size=12))
def test_a_session_read_in_any_pieces_gives_the_same_outputs(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [SESSION[a:b] for a, b in zip([0, *points], [*points, len(SESSION)], strict=True)]
    assert run(chunks) == run([SESSION])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.sampled_from(["auto", "2026-07-28", "2025-11-25"]))
def test_arbitrary_bytes_only_ever_give_outputs(data: bytes, protocol: Any) -> None:
    c = client(protocol)
    c.start()
    for piece in (data[: len(data) // 2], data[len(data) // 2:], b"\n"):
        for output in c.receive_data(piece):
            assert isinstance(output, (Write, EraDecided, Listed, Unavailable, RequestRefused))
    c.receive_eof()
