"""The MCP runtime through the runner seam, over the test launcher (plain processes).

A `RunSpec` for `mcp.<id>.<local>` reaches the MCP runtime (`Runtimes`), which
names the pinned tool (an alias included), runs one process, and answers the
outcome with `result.source`; this test recomputes `request_sha256` from the
call line 12 specifies, and `response_sha256` from the line the server
wrote (captured by a wrapper around the fake).  Start failures cool the
server down after three, without starting anything more, until a restart.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import trio

from boxmaker.brokerd.runner._echo import EchoRuntime
from boxmaker.brokerd.runner._mcp_runtime import (
    McpEvent,
    McpRuntime,
    McpServerState,
)
from boxmaker.brokerd.runner._runtimes import Runtimes
from boxmaker.brokerd.runner._spec import RunSpec, build_run_spec
from boxmaker.proto.mcp import Pin, ServerDecl, canonical_bytes
from tests.brokerd.runner._mcp_fixtures import FAKE
from tests.brokerd.runner.test_mcp_call import decl, fake_launcher, pinned

TEE = '''
import subprocess, sys
log = open(sys.argv[1], "ab")
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
for line in child.stdout:
    log.write(line)
    log.flush()
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
sys.exit(child.wait())
'''


def spec(tool: str, args: dict[str, Any], call_id: int = 5) -> RunSpec:
    return build_run_spec(call_id=call_id, session="default", tool=tool, args=args,
                          grant="g", grant_entry=None, private_network=False,
                          label="private", untrusted=True)


async def runtime_for(server: ServerDecl, pin: Pin | None, launcher: Any,
                      events: list[McpEvent] | None = None) -> McpRuntime:
    return McpRuntime(launcher, {server.id: McpServerState(decl=server, pin=pin)},
                      instance="1a2b3c4d", version="0.test",
                      on_event=events.append if events is not None else None)


async def test_a_call_reaches_the_mcp_runtime_and_its_source_recomputes(tmp_path: Path) -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    out = tmp_path / "stdout"
    script = json.dumps({"behaviours": []})
    teed = fake_launcher()
    teed.argv_of = lambda _d: [sys.executable, "-I", "-c", TEE, str(out),
                               sys.executable, "-I", str(FAKE), script]
    mcp = await runtime_for(server, pin, teed)
    runtimes = Runtimes(EchoRuntime(), [mcp])
    assert runtimes.for_tool("mcp.fake.echo") is mcp
    assert runtimes.for_tool("echo") is runtimes.main
    with trio.fail_after(120):
        outcome = await runtimes.run(spec("mcp.fake.echo", {"text": "hi"}))
    assert outcome.status == "ok"
    assert outcome.output is not None and outcome.output["content"][0]["text"] == "hi"
    source = outcome.source
    assert source is not None
    assert {k: source[k] for k in ("kind", "server", "mcp_name", "container", "protocol",
                                   "list_digest", "is_error", "exit", "egress")} == {
        "kind": "mcp", "server": "fake", "mcp_name": "echo",
        "container": "boxmaker-1a2b3c4d-mcp-fake-c5", "protocol": "2026-07-28",
        "list_digest": pin.digest, "is_error": False, "exit": 0, "egress": []}
    meta = {"io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "boxmaker", "version": "0.test"},
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    call_line = canonical_bytes({"id": "bx-call-5", "jsonrpc": "2.0", "method": "tools/call",
                                 "params": {"_meta": meta, "arguments": {"text": "hi"},
                                            "name": "echo"}})
    assert source["request_sha256"] == hashlib.sha256(call_line).hexdigest()
    answer = next(line for line in out.read_bytes().split(b"\n") if b'"bx-call-5"' in line)
    assert source["response_sha256"] == hashlib.sha256(answer).hexdigest()


async def test_an_alias_names_the_mcp_tool() -> None:
    server = decl("2026-07-28", **{"tool.add.alias": '"sum"'})
    pin = await pinned(server, fake_launcher())
    mcp = await runtime_for(server, pin, fake_launcher())
    assert mcp.mcp_name_of("mcp.fake.sum") is not None
    assert mcp.mcp_name_of("mcp.fake.add") is None
    with trio.fail_after(120):
        outcome = await mcp.run(spec("mcp.fake.sum", {"a": 1, "b": 2}))
    assert outcome.status == "ok" and outcome.output is not None
    assert outcome.output["content"][0]["text"] == "3"
    assert outcome.source is not None and outcome.source["mcp_name"] == "add"


async def test_an_unpinned_server_or_unknown_tool_runs_nothing() -> None:
    server = decl("2026-07-28")
    launcher = fake_launcher()
    mcp = await runtime_for(server, None, launcher)
    for tool in ("mcp.fake.echo", "mcp.other.echo", "mcp.fake"):
        outcome = await mcp.run(spec(tool, {}))
        assert outcome.status == "runner_unavailable" and outcome.source is None
    assert launcher.launched == []


async def test_a_drift_is_told_and_answered_pin_mismatch() -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    events: list[McpEvent] = []
    mcp = await runtime_for(server, pin, fake_launcher("added"), events)
    with trio.fail_after(120):
        outcome = await mcp.run(spec("mcp.fake.echo", {"text": "hi"}))
    assert outcome.status == "pin_mismatch" and outcome.output is None
    assert outcome.runbook is None
    assert outcome.source is not None and outcome.source["request_sha256"] is None
    assert [e.event for e in events] == ["drifted"]
    assert events[0].run is not None and events[0].run.drift is not None
    assert events[0].run.drift.added == ("shell",)


async def test_three_start_failures_cool_the_server_down_until_a_restart() -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    events: list[McpEvent] = []
    launcher = fake_launcher("exit_list")
    mcp = await runtime_for(server, pin, launcher, events)
    with trio.fail_after(120):
        for call_id in (1, 2, 3, 4):
            outcome = await mcp.run(spec("mcp.fake.echo", {"text": "x"}, call_id))
            assert outcome.status == "source_unavailable" and outcome.output is None
    assert len(launcher.launched) == 3
    assert [(e.event, e.call) for e in events] == [("cooling_down", 3)]
    assert mcp.restart("fake") is True and mcp.restart("fake") is False
    with trio.fail_after(120):
        await mcp.run(spec("mcp.fake.echo", {"text": "x"}, 5))
    assert len(launcher.launched) == 4
