"""The sans-IO client against the real `mcp-server-time` 2026.10.19 (a plain process).

The test is its own trio adapter: it writes the client's lines to the server's
stdin, keeps every byte it wrote and read, and recomputes `request_sha256` and
`response_sha256` from those captured bytes.  Both eras, as the pin sees them.
Needs scripts/get-mcp-servers (pip --target, outside .venv).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker.proto.mcp._arguments import effective_args, tool_grammar
from boxmaker.proto.mcp._client import (
    CallAnswered,
    EraDecided,
    Listed,
    McpClient,
    Output,
    State,
    Write,
)
from boxmaker.proto.mcp._nodes import ObjectNode
from boxmaker.proto.mcp._profile import compile_schema

VERSION = "2026.10.19"
SERVERS = Path(os.environ.get("BOXMAKER_MCP_SERVERS",
                              Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                              / "boxmaker" / "mcp-servers"))
TIME = SERVERS / f"time-{VERSION}"

pytestmark = pytest.mark.skipif(
    not (TIME / "mcp_server_time" / "__init__.py").is_file(),
    reason="the MCP reference server is not installed: run scripts/get-mcp-servers")


class Peer:
    """One server process; what the test wrote and read, byte for byte."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.written: list[bytes] = []
        self.read = bytearray()

    async def carry_out(self, outputs: list[Output]) -> list[Output]:
        rest: list[Output] = []
        for output in outputs:
            if isinstance(output, Write):
                self.written.append(output.line)
                assert self.process.stdin is not None
                await self.process.stdin.send_all(output.line + b"\n")
            else:
                rest.append(output)
        return rest

    async def until(self, client: McpClient, kind: type) -> Any:
        """Feed what the server writes until an output of `kind` comes."""
        assert self.process.stdout is not None
        while True:
            data = await self.process.stdout.receive_some(65536)
            self.read += data
            events = await self.carry_out(client.receive_eof() if not data
                                          else client.receive_data(data))
            for event in events:
                if isinstance(event, kind):
                    return event
            assert data, f"the server ended before {kind.__name__}: {events}"


async def start_server() -> trio.Process:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": str(TIME), "PYTHONNOUSERSITE": "1"}
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"], env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


async def one_call(protocol: Any) -> tuple[McpClient, Peer, Listed, CallAnswered]:
    process = await start_server()
    peer = Peer(process)
    try:
        with trio.fail_after(60):
            client = McpClient(protocol=protocol, version="0.test", output_max_bytes=65536)
            await peer.carry_out(client.start())
            if protocol == "auto":
                era = await peer.until(client, EraDecided)
                assert era == EraDecided(era="modern")
            listed = await peer.until(client, Listed)
            assert client.state is State.READY
            await peer.carry_out(client.send_call(7, "get_current_time", {"timezone": "UTC"}))
            answer = await peer.until(client, CallAnswered)
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        with trio.fail_after(30):
            await process.wait()
    return client, peer, listed, answer


def answer_line(peer: Peer) -> bytes:
    lines = bytes(peer.read).split(b"\n")
    return next(line for line in lines if b'"bx-call-7"' in line)


@pytest.mark.parametrize("protocol", ["auto", "2026-07-28", "2025-11-25", "auto-legacy"])
async def test_a_recorded_call_in_each_era(protocol: str) -> None:
    client, peer, listed, answer = await one_call(protocol)
    expected = "2026-07-28" if protocol in ("auto", "2026-07-28") else "2025-11-25"
    assert listed.protocol == expected == client.protocol
    assert listed.server_info is not None and listed.server_info.name == "mcp-time"
    assert [t["name"] for t in listed.tools] == ["get_current_time", "convert_time"]
    assert answer.is_error in (None, False)
    text = answer.result["content"][0]["text"]
    assert "UTC" in text
    call = next(line for line in peer.written if b"tools/call" in line)
    assert client.request_sha256 == hashlib.sha256(call).hexdigest()
    assert answer.response_sha256 == hashlib.sha256(answer_line(peer)).hexdigest()


async def test_both_eras_serve_the_same_tools_inside_the_profile() -> None:
    modern = (await one_call("auto"))[2]
    legacy = (await one_call("auto-legacy"))[2]
    assert modern.tools == legacy.tools
    for tool in modern.tools:
        assert isinstance(compile_schema(tool["inputSchema"]), ObjectNode)
    grammar = tool_grammar(modern.tools[0]["inputSchema"], None)
    assert effective_args(grammar, {"timezone": "Europe/Paris"}) == {"timezone": "Europe/Paris"}
