"""brokerd's tool sources at start-up and while it serves (12-tool-sources): the real
brokerd over a real home; the `sources` record after `start`, `Status.sources`, a
changed source set recorded again; and `ToolSources` over real files and pins."""

from __future__ import annotations

from pathlib import Path

from boxmaker.brokerd._mcp_sources import write_pin
from boxmaker.brokerd._tool_sources import EMPTY_SOURCES_DIGEST, ToolSources
from boxmaker.proto.mcp import (
    PinLedger,
    SourceSet,
    make_pin,
    pin_source,
    pin_tools,
)
from tests.fakes.brokerd import Home, admin, start

IMAGE = "sha256:" + "5b1c" * 16
SOURCE = f'''[[mcp_server]]
id = "time"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-time"]
label = "public"
untrusted = false
'''
TOOLS = [{"name": "get_current_time", "description": "Now.",
          "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}}}}]


def test_start_records_the_sources_and_status_shows_them() -> None:
    home = Home()
    try:
        (home.home / "sources").mkdir()
        (home.home / "sources" / "time.toml").write_text(SOURCE)
        proc = start(home)
        try:
            status = admin(home.admin, "status", {})["status"]
            assert status["sources"]["ok"] is True and status["sources"]["count"] == 1
            assert status["sources"]["pinned"] == 0 and status["sources"]["unpinned"] == 1
        finally:
            proc.stop()
        lines = home.audit_lines()
        keys = [next(k for k in line if k not in ("seq", "ts", "prev")) for line in lines]
        assert keys[:2] == ["start", "sources"]
        record = lines[1]["sources"]
        assert record == {"ok": True, "count": 1, "digest": status["sources"]["digest"],
                          "problem_count": 0}
    finally:
        home.cleanup()


def test_an_invalid_source_set_is_recorded_and_shown() -> None:
    home = Home()
    try:
        (home.home / "sources").mkdir()
        (home.home / "sources" / "bad.toml").write_text(SOURCE + 'mounts = ["/"]\n')
        proc = start(home)
        try:
            status = admin(home.admin, "status", {})["status"]
            assert status["sources"]["ok"] is False and status["sources"]["count"] == 0
        finally:
            proc.stop()
        (sources,) = home.events("sources")
        assert sources["ok"] is False and sources["problem_count"] == 1
    finally:
        home.cleanup()


def test_no_sources_directory_is_no_servers() -> None:
    home = Home()
    try:
        proc = start(home)
        try:
            status = admin(home.admin, "status", {})["status"]
        finally:
            proc.stop()
        assert status["sources"] == {"ok": True, "count": 0, "digest": EMPTY_SOURCES_DIGEST,
                                     "pinned": 0, "unpinned": 0}
        assert home.events("sources") == []
    finally:
        home.cleanup()


def test_tool_sources_follow_the_directory_and_the_pins(tmp_path: Path) -> None:
    directory = tmp_path / "sources"
    audit = tmp_path / "audit"
    audit.mkdir()
    seen: list[dict[str, object]] = []
    sources = ToolSources(directory, PinLedger(), audit, runner_output_max=2_097_152,
                          on_states=lambda states: seen.append(dict(states)))
    state, events = sources.refresh()
    assert isinstance(state, SourceSet) and state.servers == {}
    assert events == []  # no directory: no record, the log as before tool sources
    assert sources.refresh()[1] == []
    directory.mkdir()
    (directory / "time.toml").write_text(SOURCE)
    state, events = sources.refresh()
    assert isinstance(state, SourceSet) and list(state.servers) == ["time"]
    assert len(events) == 1 and events[0].ok and events[0].count == 1
    assert sources.servers["time"].unpinned == "none"
    decl = state.servers["time"]
    pin = make_pin(server="time", protocol="2026-07-28", source=pin_source(decl),
                   tools=pin_tools(TOOLS, ()), server_info=None, instructions=None,
                   pinned_at="2026-12-02T10:00:00.000000Z", by=1000)
    write_pin(audit, pin)
    sources.pinned("time", pin.digest, 3)
    assert sources.servers["time"].pin == pin
    summary = sources.summary()
    assert (summary.count, summary.pinned, summary.unpinned) == (1, 1, 0)
    sources.drifted("time", 4)
    assert sources.servers["time"].unpinned == "drifted"
    assert seen[-1]["time"] == sources.servers["time"]
    (directory / "time.toml").write_text(SOURCE.replace('id = "time"', 'id = "Time"'))
    state, events = sources.refresh()
    assert not state.report.ok and events[0].problem_count == 1 and sources.servers == {}

