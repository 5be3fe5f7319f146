"""Deciding `mcp.*` calls through the real brokerd (12-tool-sources "Deciding"): a
pinned server's tool granted and allowed with its effective arguments and the pin
recorded, an ungranted one denied, unpinned / invalid sources / unknown tools /
bad arguments each denied with its code, every call recorded first."""

from __future__ import annotations

from typing import Any

import pytest

from tests.brokerd._mcp_home import pin_for, pin_in_log
from tests.fakes.brokerd import Home, call_request, request, start

IMAGE = "sha256:" + "5b1c" * 16
SOURCE = f'''[[mcp_server]]
id = "time"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-time"]
label = "private"
untrusted = true
'''
SCHEMA = {"type": "object", "required": ["n"],
          "properties": {"timezone": {"type": "string", "default": "UTC"},
                         "n": {"type": "integer", "minimum": 1, "maximum": 5}}}
TOOLS = [{"name": "get_current_time", "description": "Now.", "inputSchema": SCHEMA},
         {"name": "convert_time", "description": "Convert.", "inputSchema": SCHEMA}]
GRANTS = '''
[[grant]]
id = "time-small"
tool = "mcp.time.get_current_time"
mode = "allow"
args.n = { max = 3 }
'''


@pytest.fixture
def home() -> Any:
    made = Home(grants={"echo.toml": GRANTS})
    (made.home / "sources").mkdir()
    (made.home / "sources" / "time.toml").write_text(SOURCE)
    yield made
    made.cleanup()


def decisions(home: Home) -> list[dict[str, Any]]:
    return home.events("decision")


def test_granted_ungranted_and_refused_calls(home: Home) -> None:
    pin = pin_for(SOURCE, "time", TOOLS)
    pin_in_log(home, pin)
    proc = start(home)
    try:
        allowed = request(home.broker, call_request("s1", "mcp.time.get_current_time",
                                                    {"n": 2}))
        ungranted = request(home.broker, call_request("s1", "mcp.time.convert_time",
                                                      {"n": 2}))
        too_many = request(home.broker, call_request("s1", "mcp.time.get_current_time",
                                                     {"n": 4}))
        bad = request(home.broker, call_request("s1", "mcp.time.get_current_time",
                                                {"n": 2, "extra": 1}))
        unknown = request(home.broker, call_request("s1", "mcp.time.nothing", {}))
        undeclared = request(home.broker, call_request("s1", "mcp.git.git_log", {}))
    finally:
        proc.stop()
    # The echo runner runs no MCP server: the allowed call is not run.
    assert allowed[-1]["error"]["code"] == "runner_unavailable"
    assert ungranted[-1]["denied"]["code"] == "no_grant"
    assert too_many[-1]["denied"]["code"] == "no_grant"
    assert bad[-1]["denied"]["code"] == "bad_args"
    assert unknown[-1]["denied"]["code"] == "unknown_tool"
    assert undeclared[-1]["denied"]["code"] == "unknown_tool"
    first, second, *rest = decisions(home)
    assert first["outcome"] == {"allowed": {}} and first["grant"] == "time-small"
    assert first["effective_args"] == {"n": 2, "timezone": "UTC"}
    assert first["pin"] == pin.digest
    assert second["pin"] == pin.digest and "effective_args" in second
    assert rest[-1].get("pin") is None  # no server: no pin
    calls = home.events("call")
    assert [c["tool"] for c in calls] == [
        "mcp.time.get_current_time", "mcp.time.convert_time", "mcp.time.get_current_time",
        "mcp.time.get_current_time", "mcp.time.nothing", "mcp.git.git_log"]


def test_an_unpinned_server_and_an_invalid_source_set(home: Home) -> None:
    proc = start(home)
    try:
        unpinned = request(home.broker, call_request("s1", "mcp.time.get_current_time",
                                                     {"n": 2}))
        (home.home / "sources" / "bad.toml").write_text("[[mcp_server]]\nid = 5\n")
        invalid = request(home.broker, call_request("s1", "mcp.time.get_current_time",
                                                    {"n": 2}))
        echo = request(home.broker, call_request("s1", "echo", {"text": "hi"}))
    finally:
        proc.stop()
    assert unpinned[-1]["denied"]["code"] == "source_unpinned"
    assert unpinned[-1]["denied"]["runbook"] == "docs/runbook.md#source-unpinned"
    assert "unpinned (none)" in unpinned[-1]["denied"]["reason"]
    assert invalid[-1]["denied"]["code"] == "sources_invalid"
    assert invalid[-1]["denied"]["runbook"] == "docs/runbook.md#sources-invalid"
    assert echo[-1]["denied"]["code"] == "no_grant"  # built-ins are not affected
    records = home.events("sources")
    assert [r["ok"] for r in records] == [True, False]  # the change recorded
