"""boxmaker/_source_files.py: the sources directory, the log's pin records and the pin
files as bxctl reads them offline, on real files: the pin is the newest record's file
(not the newest file); its file edited, a symbolic link or missing leaves the server
unpinned with brokerd's reason; a pin of another declaration (`declaration_changed`);
records before an accepted break (`before_break`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from boxmaker._source_files import (
    offline_pin,
    offline_registry,
    offline_view,
    pins_directory,
    read_pin_ledger,
    read_sources,
)
from boxmaker.brokerd._tool_sources import pin_record
from boxmaker.proto.mcp import InvalidSourceSet, SourceSet, encode_pin
from tests.brokerd._mcp_home import pin_for
from tests.fakes.audit_log import LogBuilder

IMAGE = "sha256:" + "5b1c" * 16
SOURCE = f'''[[mcp_server]]
id = "git"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-git"]
label = "public"
'''
TOOLS = [{"name": "git_log", "description": "Log.", "inputSchema": {"type": "object"}}]


def _logged(audit: Path, *events: Any) -> None:
    builder = LogBuilder("2026-12-02.jsonl")
    for event in events:
        builder.add(event)
    builder.write(audit)


def test_the_pin_is_the_newest_records_file_when_it_holds(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    pins = pins_directory(audit)
    assert pins == audit / "pins"
    assert read_pin_ledger(audit).newest("git") is None  # missing: no records
    pins.mkdir(parents=True)
    old = pin_for(SOURCE, "git", TOOLS)
    new = pin_for(SOURCE, "git", [dict(TOOLS[0], description="Log!")])
    planted = attrs.evolve(pin_for(SOURCE, "git", [dict(TOOLS[0], description="Planted")]),
                           pinned_at="2027-01-01T00:00:00.000000Z")
    for pin in (old, new, planted):
        (pins / pin.file_name).write_bytes(encode_pin(pin))
    _logged(audit, pin_record(new, prev=None, by=1000),
            pin_record(old, prev=new.digest, by=1000))
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "git.toml").write_text(SOURCE)
    sources, checks, registry = offline_view(tmp_path / "sources", audit,
                                             runner_output_max=1 << 22)
    assert isinstance(sources, SourceSet)
    # the newest record's pin, not the newest file (`planted`) nor the newest pinned_at
    assert registry.servers["git"].pin == old.digest
    assert offline_pin(checks, "git") == old
    assert offline_pin(checks, "nope") is None
    # an edited file of the newest record: unpinned, as brokerd says it
    (pins / old.file_name).write_bytes(encode_pin(old).replace(b"Log.", b"Log?"))
    _, checks, registry = offline_view(tmp_path / "sources", audit, runner_output_max=1 << 22)
    assert registry.servers["git"].unpinned == "file_damaged"
    os.unlink(pins / old.file_name)
    os.symlink(pins / new.file_name, pins / old.file_name)  # a link is no pin
    _, _, registry = offline_view(tmp_path / "sources", audit, runner_output_max=1 << 22)
    assert registry.servers["git"].unpinned == "file_damaged"
    os.unlink(pins / old.file_name)
    _, _, registry = offline_view(tmp_path / "sources", audit, runner_output_max=1 << 22)
    assert registry.servers["git"].unpinned == "file_missing"
    # the same files through another pins directory (`bxctl grants explain --pins`)
    other = tmp_path / "elsewhere"
    pins.rename(other)
    (other / old.file_name).write_bytes(encode_pin(old))
    _, _, registry = offline_view(tmp_path / "sources", audit, runner_output_max=1 << 22,
                                  pins_dir=other)
    assert registry.servers["git"].pin == old.digest


def test_a_pin_of_another_declaration_leaves_the_server_unpinned(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    pin = pin_for(SOURCE, "git", TOOLS)
    (audit / "pins").mkdir(parents=True)
    (audit / "pins" / pin.file_name).write_bytes(encode_pin(pin))
    _logged(audit, pin_record(pin, prev=None, by=1000))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "git.toml").write_text(SOURCE.replace("mcp-server-git", "other"))
    _, _, registry = offline_view(tmp_path / "s", audit, runner_output_max=1 << 22)
    assert registry.servers["git"].pin is None
    assert registry.servers["git"].unpinned == "declaration_changed"
    sources = read_sources(tmp_path / "s", runner_output_max=1 << 22)
    assert offline_registry(sources, {}).servers["git"].unpinned == "none"


def test_records_before_an_accepted_break_pin_nothing(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    pin = pin_for(SOURCE, "git", TOOLS)
    (audit / "pins").mkdir(parents=True)
    (audit / "pins" / pin.file_name).write_bytes(encode_pin(pin))
    builder = LogBuilder("2026-12-02.jsonl")
    builder.add(pin_record(pin, prev=None, by=1000))
    builder.garbage()
    builder.accept_break(("2026-12-02.jsonl", 2, "bad_json"), 1)
    builder.write(audit)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "git.toml").write_text(SOURCE)
    _, _, registry = offline_view(tmp_path / "s", audit, runner_output_max=1 << 22)
    assert registry.servers["git"].unpinned == "before_break"


def test_a_broken_or_unreadable_sources_directory_is_an_invalid_set(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "bad.toml").write_text("[[mcp_server]\n")
    assert not offline_registry(read_sources(tmp_path / "s", runner_output_max=1 << 22),
                                {}).valid
    (tmp_path / "f").write_text("")
    state = read_sources(tmp_path / "f", runner_output_max=1 << 22)
    assert isinstance(state, InvalidSourceSet)
    assert state.report.problems[0].rule == "S1"
    assert read_sources(tmp_path / "missing", runner_output_max=1 << 22).report.count == 0
