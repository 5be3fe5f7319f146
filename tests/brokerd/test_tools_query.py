"""broker.sock's `tools` query through the real brokerd (12-tool-sources "Wire
changes"): the offered tools of a pinned server, from the pin, under their wire and
model names; nothing without a pin; not recorded."""

from __future__ import annotations

from boxmaker.proto.mcp import canonical_sha256
from tests.brokerd._mcp_home import pin_for, pin_in_log
from tests.brokerd.test_tool_sources import SOURCE, TOOLS
from tests.fakes.brokerd import Home, admin, request, start


def test_the_tools_query_offers_the_pinned_tools_under_their_names() -> None:
    home = Home()
    try:
        (home.home / "sources").mkdir()
        (home.home / "sources" / "time.toml").write_text(SOURCE)
        tools = [*TOOLS, {"name": "hidden", "description": "Now\u200b.",
                          "inputSchema": {"type": "object"}}]
        pin_in_log(home, pin_for(SOURCE, "time", tools))
        proc = start(home)
        try:
            (answer,) = request(home.broker, {"v": 1, "id": 4, "tools": {}})
            status = admin(home.admin, "status", {})["status"]
        finally:
            proc.stop()
        assert answer["id"] == 4
        items = answer["tools"]["items"]
        # S17: a description with a zero-width space is not offered.
        assert items == [{"name": "mcp.time.get_current_time",
                          "model_name": "mcp__time__get_current_time",
                          "description": "Now.", "parameters": TOOLS[0]["inputSchema"],
                          "opaque": False}]
        assert answer["tools"]["digest"] == canonical_sha256(items)
        assert status["sources"]["pinned"] == 1
        assert "call" not in {k for line in home.audit_lines() for k in line}  # not recorded
    finally:
        home.cleanup()


def test_the_tools_query_without_a_pin_offers_nothing() -> None:
    home = Home()
    try:
        (home.home / "sources").mkdir()
        (home.home / "sources" / "time.toml").write_text(SOURCE)
        proc = start(home)
        try:
            (answer,) = request(home.broker, {"v": 1, "id": 4, "tools": {}})
        finally:
            proc.stop()
        assert answer["tools"] == {"digest": canonical_sha256([]), "items": []}
    finally:
        home.cleanup()
