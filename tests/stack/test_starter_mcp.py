"""The starter MCP source of `boxmaker up` (boxmaker/stack/_starter_mcp.py, issue 26
item 2): written into a real home by write_starter_home, read back by brokerd's
and loopd's own loaders, kept in step with the MCP image while it is up's own,
never touched once the owner edits it; and the first-pin check on the exact
`bxctl mcp list --json` shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boxmaker._brokerd_config import load_config as load_brokerd
from boxmaker._source_files import read_sources
from boxmaker.loopd._config import load_config as load_loopd
from boxmaker.policy._load import load_grants
from boxmaker.policy._model import GrantSet
from boxmaker.proto.mcp import SourceSet
from boxmaker.stack import _starter_mcp
from boxmaker.stack._home import write_starter_home
from boxmaker.stack._owned import is_owned, rewrite_owned

TOOLS = "sha256:" + "ab" * 32
COMMANDS = "sha256:" + "cd" * 32
MCP = "sha256:" + "ef" * 32
MCP2 = "sha256:" + "12" * 32


def _write(tmp_path: Path, mcp_image: str | None) -> tuple[Path, list[Path]]:
    home = tmp_path / "home"
    starter = write_starter_home(home, upstream="http://127.0.0.1:8080",
                                 demo_notes=tmp_path / "user" / "demo" / "notes",
                                 owner_home=tmp_path / "user", tools_image=TOOLS,
                                 commands_image=COMMANDS, mcp_image=mcp_image)
    return home, starter.created


def test_the_starter_source_grants_and_loop_entry_load(tmp_path: Path) -> None:
    home, created = _write(tmp_path, MCP)
    assert home / "sources" / "time.toml" in created
    assert home / "grants" / "time.toml" in created
    brokerd = load_brokerd(home / "brokerd.toml")
    sources = read_sources(brokerd.sources, runner_output_max=brokerd.runner.output_max_bytes)
    assert isinstance(sources, SourceSet), sources
    decl = sources.servers["time"]
    assert decl.image == MCP
    assert decl.command == ("/usr/bin/python3", "-m", "mcp_server_time", "--local-timezone",
                            "UTC")
    assert dict(decl.env) == {"PYTHONPATH": "/opt/mcp/time"}
    assert decl.untrusted is False
    grants = load_grants(home / "grants")
    assert isinstance(grants, GrantSet), grants
    time_grants = {g.id: g for g in grants.grants if g.id.startswith("time-")}
    assert set(time_grants) == {"time-get-current-time", "time-convert-time"}
    assert all(g.mode == "allow" for g in time_grants.values())
    loopd = load_loopd(home / "loopd.toml")
    assert "mcp.time.*" in loopd.tools
    assert is_owned(home, "sources/time.toml")


def test_without_the_mcp_image_there_is_no_starter_source(tmp_path: Path) -> None:
    home, created = _write(tmp_path, None)
    assert not (home / "sources").exists()
    assert not (home / "grants" / "time.toml").exists()
    assert "mcp.time.*" not in load_loopd(home / "loopd.toml").tools
    assert all("time" not in path.name for path in created)


def test_the_source_follows_the_image_until_the_owner_edits_it(tmp_path: Path) -> None:
    home, _ = _write(tmp_path, MCP)
    source = home / "sources" / "time.toml"
    assert rewrite_owned(home, "sources/time.toml", _starter_mcp.source_toml(MCP2).encode())
    assert MCP2 in source.read_text()
    # a second write_starter_home (the next up) leaves every existing file alone
    _, created = _write(tmp_path, MCP)
    assert created == []
    assert MCP2 in source.read_text()
    edited = source.read_text().replace('label = "public"', 'label = "private"')
    source.write_text(edited)
    assert not is_owned(home, "sources/time.toml")
    assert not rewrite_owned(home, "sources/time.toml", _starter_mcp.source_toml(MCP).encode())
    assert source.read_text() == edited


def _status(**view: object) -> bytes:
    base: dict[str, object] = {"id": "time", "state": "unpinned", "reason": "none",
                               "pin": None, "offered": 0, "disabled": [], "failures": 0}
    return json.dumps({"servers": [dict(base, **view)]}).encode()


@pytest.mark.parametrize(("status", "first"), [
    (_status(), True),
    (_status(reason="unpinned"), False),          # the owner unpinned it: not up's to redo
    (_status(reason="drifted"), False),
    (_status(state="pinned", reason=None, pin="ab" * 32, offered=2), False),
    (_status(id="git"), False),
    (b"{}", False),
    (b"not json", False),
])
def test_only_a_never_pinned_time_server_is_offered_for_pinning(status: bytes,
                                                                 first: bool) -> None:
    assert _starter_mcp.unpinned_never(status) is first


def test_under_require_passkey_the_advice_says_why(tmp_path: Path) -> None:
    assert "bxctl mcp pin time" in _starter_mcp.pin_advice(False)
    assert "bxctl mcp pin time" in _starter_mcp.pin_advice(True)
    assert "passkey signs the pin on the approval page" in _starter_mcp.pin_advice(True)


@pytest.mark.parametrize("require_passkey", [False, True])
async def test_the_first_pin_runs_bxctl_mcp_pin_under_require_passkey_too(
        tmp_path: Path, require_passkey: bool) -> None:
    """Under require_passkey bxctl's yes prints the pin page's link, so up runs it too."""
    asked = tmp_path / "asked"
    fake = tmp_path / "bxctl"
    fake.write_text(f"""#!/bin/sh
echo "$@" >> {asked}
if [ "$2" = list ]; then printf '%s' '{_status().decode()}'; fi
""")
    fake.chmod(0o755)
    said: list[str] = []
    await _starter_mcp.offer_first_pin([str(fake)], interactive=True,
                                       require_passkey=require_passkey, say=said.append)
    assert asked.read_text().splitlines() == ["mcp list --json", "mcp pin time"]
    assert said == ["the starter time server is not pinned yet: here is what it serves"]
    asked.unlink()
    await _starter_mcp.offer_first_pin([str(fake)], interactive=False,
                                       require_passkey=require_passkey, say=said.append)
    assert asked.read_text().splitlines() == ["mcp list --json"]
    assert said[-1] == _starter_mcp.pin_advice(require_passkey)
