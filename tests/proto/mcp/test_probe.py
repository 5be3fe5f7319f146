"""The probe answer's tools: status against the pin, diff, opaque, disabled, suggestions."""

from __future__ import annotations

import copy

from boxmaker.proto.mcp._pin import pin_tools
from boxmaker.proto.mcp._probe import probe_tools
from tests.proto.mcp.test_pin import TOOLS, decl, pin_of


def test_a_first_probe_and_a_changed_one() -> None:
    d = decl()
    candidate, items = probe_tools(d, protocol="2025-11-25", live=pin_tools(TOOLS, ()),
                                   server_info=None, instructions=None, current=None,
                                   pinned_at="2026-12-02T09:00:00.000000Z", by=1000)
    assert candidate.digest == pin_of().digest
    assert [(i["name"], i["status"]) for i in items] == [("convert_time", "added"),
                                                         ("get_current_time", "added")]
    assert all(i["opaque"] is None and i["disabled"] is None for i in items)
    changed = copy.deepcopy(TOOLS)
    changed[0]["description"] = "Get the time \u200b"
    changed[0]["inputSchema"]["properties"]["log_file"] = {"type": "string"}
    changed.pop(1)
    _, items = probe_tools(d, protocol="2025-11-25", live=pin_tools(changed, ()),
                           server_info=None, instructions=None, current=pin_of(),
                           pinned_at="2026-12-02T10:00:00.000000Z", by=1000)
    by = {i["name"]: i for i in items}
    assert by["convert_time"]["status"] == "removed" and by["convert_time"]["disabled"] is None
    now = by["get_current_time"]
    assert now["status"] == "changed" and now["disabled"] == "S17"
    assert now["diff"] == [{"field": "description", "change": "changed"},
                           {"field": "inputSchema", "change": "changed"}]
    assert now["suggested_kinds"] == {"log_file": "path"}
