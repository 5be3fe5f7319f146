"""A brokerd home with MCP tool sources and a pin already in its log, for the tests
of broker.sock's `tools` and of `mcp.*` calls (shared by tests/brokerd and
tests/integration).  The pin record is appended by brokerd's own audit writer,
so the chain holds, as if the owner had pinned with `bxctl mcp pin`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import trio

from boxmaker._brokerd_config import load_config
from boxmaker.brokerd._mcp_sources import write_pin
from boxmaker.brokerd._tool_sources import pin_record
from boxmaker.brokerd.log._audit_link import open_audit
from boxmaker.proto.mcp import Pin, SourceSet, make_pin, parse_source_texts, pin_source, pin_tools
from tests.fakes import mcp_stdio_server
from tests.fakes.brokerd import Home, start
from tests.fakes.podman_mcp import podman_program


def pin_for(source_text: str, server: str, tools: Sequence[dict[str, Any]], *,
            protocol: str = "2025-11-25") -> Pin:
    state = parse_source_texts({"s.toml": source_text})
    assert isinstance(state, SourceSet), state
    decl = state.servers[server]
    return make_pin(server=server, protocol=protocol,  # type: ignore[arg-type]
                    source=pin_source(decl), tools=pin_tools(list(tools), decl.pin_ignore),
                    server_info=None, instructions=None,
                    pinned_at="2026-12-02T10:00:00.000000Z", by=1000)


def pin_in_log(home: Home, *pins: Pin) -> None:
    """Write each pin file, then append its `mcp_pin` record (brokerd started once,
    then stopped); the pins are of different servers."""

    async def append() -> None:
        config = load_config(home.config)
        startup = await open_audit(config, accept_break=False, fsync=None)
        try:
            for pin in pins:
                write_pin(config.audit, pin)
            await startup.writer.append([pin_record(pin, prev=None, by=1000) for pin in pins])
        finally:
            await startup.writer.aclose()

    start(home).stop()  # the log and its checkpoint key, as a first start makes them
    trio.run(append)


IMAGE = "sha256:" + "5b1c" * 16


def server_source(server: str, behaviours: list[str]) -> str:
    """A declaration running the test MCP server with `behaviours` (modern era)."""
    script = json.dumps({"behaviours": behaviours})
    command = json.dumps([sys.executable, "-I", mcp_stdio_server.__file__, script])
    return f'''[[mcp_server]]
id = "{server}"
image = "{IMAGE}"
command = {command}
label = "private"
untrusted = true
protocol = "2026-07-28"
'''


def grants(servers: Iterable[str]) -> str:
    """An `allow` grant of each server's `echo` (results up to `private`)."""
    return "".join(f'''
[[grant]]
id = "{server}-echo"
tool = "mcp.{server}.echo"
mode = "allow"
max_label = "private"
''' for server in servers)


def fake_mcp_home(servers: Mapping[str, list[str]]) -> Home:
    """A brokerd home whose `[runner]` is the stand-in podman (tests/fakes/podman_mcp.py)
    and whose sources declare one test MCP server per entry (server id -> the fake's
    behaviours), each pinned with the fake's well-behaved list (so a behaviour that
    changes the list is a drift) and its `echo` granted."""
    made = Home(runner="podman", grants={"mcp.toml": grants(servers)}, fsync=False)
    program = podman_program(made.root)
    made.config.write_text(made.config.read_text().replace(
        'kind = "podman"\n', f'kind = "podman"\npodman = "{program}"\nimage = "{IMAGE}"\n'))
    (made.home / "sources").mkdir()
    pins = []
    for server, behaviours in servers.items():
        text = server_source(server, behaviours)
        (made.home / "sources" / f"{server}.toml").write_text(text)
        pins.append(pin_for(text, server, mcp_stdio_server.tools(set()),
                            protocol="2026-07-28"))
    pin_in_log(made, *pins)
    return made
