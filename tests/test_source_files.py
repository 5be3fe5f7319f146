"""boxmaker/_source_files.py: the sources directory and the pin files as bxctl reads
them offline, on real files: a pin file that does not recompute, is misnamed or is a
symbolic link is nobody's pin; of several fitting pins the newest wins; a pin of
another declaration leaves the server unpinned (`declaration_changed`)."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from boxmaker._source_files import (
    offline_pin,
    offline_registry,
    offline_view,
    pins_directory,
    read_pin_files,
    read_sources,
)
from boxmaker.proto.mcp import InvalidSourceSet, SourceSet, encode_pin
from tests.brokerd._mcp_home import pin_for

IMAGE = "sha256:" + "5b1c" * 16
SOURCE = f'''[[mcp_server]]
id = "git"
image = "{IMAGE}"
command = ["/usr/local/bin/mcp-server-git"]
label = "public"
'''
TOOLS = [{"name": "git_log", "description": "Log.", "inputSchema": {"type": "object"}}]


def test_pins_that_recompute_and_the_newest_fitting_one(tmp_path: Path) -> None:
    pins = pins_directory(tmp_path / "audit")
    assert pins == tmp_path / "audit" / "pins"
    assert read_pin_files(pins) == []  # missing: no pins
    pins.mkdir(parents=True)
    old = pin_for(SOURCE, "git", TOOLS)
    new = attrs.evolve(pin_for(SOURCE, "git", [dict(TOOLS[0], description="Log!")]),
                       pinned_at="2026-12-02T11:00:00.000000Z")
    (pins / old.file_name).write_bytes(encode_pin(old))
    (pins / new.file_name).write_bytes(encode_pin(new))
    (pins / ("0" * 64 + ".json")).write_bytes(encode_pin(old))  # misnamed
    edited = pin_for(SOURCE, "git", [dict(TOOLS[0], description="Edited")])
    (pins / edited.file_name).write_bytes(encode_pin(edited).replace(b"Edited", b"Edited!"))
    os.symlink(pins / old.file_name, pins / ("1" * 64 + ".json"))
    assert {pin.digest for pin in read_pin_files(pins)} == {old.digest, new.digest}
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "git.toml").write_text(SOURCE)
    sources, found, registry = offline_view(tmp_path / "sources", pins,
                                            runner_output_max=1 << 22)
    assert isinstance(sources, SourceSet)
    assert registry.servers["git"].pin == new.digest
    assert offline_pin(found, registry, "git") == new
    assert offline_pin(found, registry, "nope") is None


def test_a_pin_of_another_declaration_leaves_the_server_unpinned(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "git.toml").write_text(SOURCE.replace("mcp-server-git", "other"))
    sources = read_sources(tmp_path / "s", runner_output_max=1 << 22)
    registry = offline_registry(sources, [pin_for(SOURCE, "git", TOOLS)])
    assert registry.servers["git"].pin is None
    assert registry.servers["git"].unpinned == "declaration_changed"
    assert offline_registry(sources, []).servers["git"].unpinned == "none"


def test_a_broken_or_unreadable_sources_directory_is_an_invalid_set(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "bad.toml").write_text("[[mcp_server]\n")
    assert not offline_registry(read_sources(tmp_path / "s", runner_output_max=1 << 22),
                                []).valid
    (tmp_path / "f").write_text("")
    state = read_sources(tmp_path / "f", runner_output_max=1 << 22)
    assert isinstance(state, InvalidSourceSet)
    assert state.report.problems[0].rule == "S1"
    assert read_sources(tmp_path / "missing", runner_output_max=1 << 22).report.count == 0
