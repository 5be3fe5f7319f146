"""One MCP call and one probe through the test launcher (plain subprocesses, no podman).

The lifecycle of 12 over real processes: probe, pin, call, and each way a call
ends (ok, pin_mismatch by drift or by version, tool_failed, source_unavailable,
timeout), with what `result.source` records.  Timers on `autojump_clock`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from boxmaker.brokerd.runner._mcp_call import McpRun, probe_mcp_server, run_mcp_call
from boxmaker.brokerd.runner._mcp_launch import Launch, SubprocessMcpLauncher
from boxmaker.proto.mcp import (
    Pin,
    ServerDecl,
    make_pin,
    pin_source,
    pin_tools,
)
from tests.brokerd.runner._mcp_fixtures import FAKE, server_decl, server_toml
from tests.brokerd.runner.test_mcp_io import TIME, needs_time

IMAGE = "sha256:" + "5b1c" * 16


def decl(protocol: str = "auto", **more: str) -> ServerDecl:
    extra = "".join(f"{key} = {value}\n" for key, value in more.items())
    return server_decl(server_toml(IMAGE, ["/usr/local/bin/fake"], protocol=protocol,
                                   start_timeout_ms=None, extra=extra))


def fake_launcher(*behaviours: str, **script: Any) -> SubprocessMcpLauncher:
    line = json.dumps({"behaviours": list(behaviours), **script})
    return SubprocessMcpLauncher(lambda _decl: [sys.executable, "-I", str(FAKE), line])


NAMES = itertools.count(1)


def name() -> str:
    return f"boxmaker-test-mcp-fake-p{next(NAMES)}"


async def pinned(server: ServerDecl, launcher: SubprocessMcpLauncher) -> Pin:
    with trio.fail_after(120):
        probe = await probe_mcp_server(launcher, server, name, version="0.test")
    assert probe.listed is not None, probe.problem
    listed = probe.listed
    assert listed.protocol in ("2026-07-28", "2025-11-25", "2025-06-18")
    return make_pin(server=server.id, protocol=listed.protocol,  # type: ignore[arg-type]
                    source=pin_source(server), tools=pin_tools(listed.tools, ()),
                    server_info=listed.server_info, instructions=listed.instructions,
                    pinned_at="2026-12-02T10:00:00.000000Z", by=1000)


async def one_call(server: ServerDecl, launcher: SubprocessMcpLauncher, pin: Pin,
                   tool: str = "echo", args: dict[str, Any] | None = None) -> McpRun:
    with trio.fail_after(120):
        return await run_mcp_call(
            launcher, Launch(decl=server, name="boxmaker-test-mcp-fake-c5"), pin=pin,
            call_id=5, mcp_name=tool, arguments=args if args is not None else {"text": "hi"},
            version="0.test")


@pytest.mark.parametrize(("protocol", "behaviours", "era"), [
    ("auto", (), "2026-07-28"), ("auto", ("legacy",), "2025-11-25"),
    ("2025-06-18", (), "2025-06-18"), ("2026-07-28", (), "2026-07-28"),
])
async def test_probe_pin_and_call(protocol: str, behaviours: tuple[str, ...], era: str) -> None:
    server, launcher = decl(protocol), fake_launcher(*behaviours)
    pin = await pinned(server, launcher)
    assert pin.protocol == era
    run = await one_call(server, launcher, pin)
    assert run.status == "ok", run
    assert run.output is not None and run.output["content"] == [{"type": "text", "text": "hi"}]
    assert run.protocol == era and run.list_digest == pin.digest
    assert run.is_error is False and run.exit == 0 and run.drift is None
    assert run.request_sha256 is not None and run.response_sha256 is not None
    assert run.container == "boxmaker-test-mcp-fake-c5"


async def test_a_legacy_probe_takes_a_fresh_process() -> None:
    launcher = fake_launcher("legacy")
    with trio.fail_after(120):
        probe = await probe_mcp_server(launcher, decl(), name, version="0.test")
    assert probe.listed is not None and len(probe.containers) == 2
    assert launcher.launched == list(probe.containers)


@pytest.mark.parametrize(("behaviour", "field"), [
    ("description", "changed"), ("added", "added"), ("renamed", "added"),
    ("schema", "changed"), ("annotation", "changed"), ("bidi", "changed"),
])
async def test_a_drift_is_pin_mismatch_and_the_call_is_not_sent(behaviour: str,
                                                                field: str) -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    run = await one_call(server, fake_launcher(behaviour), pin)
    assert run.status == "pin_mismatch" and run.output is None
    assert run.drift is not None and getattr(run.drift, field)
    assert run.list_digest == run.drift.live != pin.digest
    assert run.request_sha256 is None and run.response_sha256 is None


async def test_another_version_after_the_pin_is_pin_mismatch(tmp_path: Path) -> None:
    server = decl("2025-11-25")
    launcher = fake_launcher("second_protocol", state=str(tmp_path / "starts"))
    pin = await pinned(server, launcher)
    run = await one_call(server, launcher, pin)
    assert run.status == "pin_mismatch" and run.protocol == "2025-06-18"
    assert run.message == "protocol 2025-06-18 where 2025-11-25 was pinned"


async def test_a_changed_declaration_is_pin_mismatch() -> None:
    pin = await pinned(decl("2026-07-28"), fake_launcher())
    changed = decl("2026-07-28", env='{ DEBUG = "1" }')
    run = await one_call(changed, fake_launcher(), pin)
    assert run.status == "pin_mismatch"
    assert run.drift is not None and run.drift.source == ("env_sha256",)


@pytest.mark.parametrize(("behaviour", "kind", "answered"), [
    ("error", "mcp_error", True), ("input_required", "input_required", True),
    ("noise", "protocol", False), ("exit_call", "crashed", False),
])
async def test_a_failed_call_is_tool_failed(behaviour: str, kind: str, answered: bool) -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    run = await one_call(server, fake_launcher(behaviour), pin)
    assert run.status == "tool_failed", run
    assert run.output is not None and run.output["error"]["code"] == kind
    assert run.request_sha256 is not None
    assert (run.response_sha256 is not None) == answered
    if behaviour == "exit_call":
        assert run.exit == 3


async def test_an_exit_before_the_call_line_is_source_unavailable() -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    run = await one_call(server, fake_launcher("exit_list"), pin)
    assert run.status == "source_unavailable" and run.request_sha256 is None
    assert run.list_digest is None


async def test_a_program_that_cannot_start_is_runner_unavailable() -> None:
    server = decl("2026-07-28")
    pin = await pinned(server, fake_launcher())
    missing = SubprocessMcpLauncher(lambda _d: ["/nonexistent/mcp-server"])
    run = await one_call(server, missing, pin)
    assert run.status == "runner_unavailable" and run.exit is None


async def test_silence_is_source_unavailable(autojump_clock: trio.testing.MockClock) -> None:
    """The clock jumps only after 3 s of real idleness: a real process's exit is
    waited for idly, and a clock jumping at once would jump past `fail_after`."""
    autojump_clock.autojump_threshold = math.inf
    autojump_clock.rate = 1.0
    server = decl("2026-07-28", start_timeout_ms="5000")
    pin = await pinned(server, fake_launcher())
    autojump_clock.rate = 0.0
    autojump_clock.autojump_threshold = 3.0
    run = await one_call(server, fake_launcher("silent"), pin)
    assert run.status == "source_unavailable" and "start_timeout_ms" in (run.message or "")
    assert run.request_sha256 is None


async def test_no_answer_is_a_timeout(autojump_clock: trio.testing.MockClock) -> None:
    """The clock stands still while the fake answers the list (it does within 3 s of
    real time), and jumps to the call's deadline once it is silent."""
    autojump_clock.autojump_threshold = math.inf
    autojump_clock.rate = 1.0
    server = decl("2026-07-28", call_timeout_ms="9000")
    pin = await pinned(server, fake_launcher())
    autojump_clock.rate = 0.0
    autojump_clock.autojump_threshold = 3.0
    run = await one_call(server, fake_launcher("no_answer"), pin)
    assert run.status == "timeout" and run.output is None
    assert run.request_sha256 is not None and run.response_sha256 is None
    assert run.message == "no answer within call_timeout_ms (9000 ms)"


async def test_a_server_that_ignores_the_end_of_its_input_is_killed(
        autojump_clock: trio.testing.MockClock) -> None:
    launcher = fake_launcher("stay_on_eof")
    async with launcher.launch(Launch(decl=decl(), name="n")) as process:
        pass
    assert process.returncode is not None and process.returncode < 0


@needs_time
@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_the_reference_server_probed_pinned_and_called(protocol: str) -> None:
    launcher = SubprocessMcpLauncher(
        lambda _d: [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        extra_env={"PYTHONPATH": str(TIME), "PYTHONNOUSERSITE": "1"})
    server = decl(protocol)
    pin = await pinned(server, launcher)
    assert [tool.name for tool in pin.tools] == ["convert_time", "get_current_time"]
    run = await one_call(server, launcher, pin, "get_current_time", {"timezone": "UTC"})
    assert run.status == "ok", run
    assert run.output is not None and "UTC" in run.output["content"][0]["text"]
    assert run.exit == 0 and run.list_digest == pin.digest
    assert len(run.request_sha256 or "") == len(hashlib.sha256().hexdigest())
