"""MCP calls end to end through the real brokerd and a real podman (12-tool-sources):
the reference `mcp-server-time` (scripts/build-mcp-image) pinned from a live probe,
a granted call allowed, run in its container and recorded with `result.source`; an
ungranted one denied; a pin that the live list does not match refused
(`pin_mismatch`, the server unpinned by the `drifted` record); the log verified."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
import trio

from boxmaker.brokerd.runner._mcp_call import probe_mcp_server
from boxmaker.proto.mcp import (
    SourceSet,
    canonical_bytes,
    make_pin,
    parse_source_texts,
    pin_source,
    pin_tools,
    sha256_hex,
)
from tests.brokerd._mcp_home import pin_in_log
from tests.brokerd.runner._mcp_fixtures import server_toml
from tests.brokerd.runner.test_mcp_launch import _podman_launcher, mcp_image
from tests.fakes.brokerd import BXCTL, Home, call_request, env_for, request, start
from tests.fakes.podman import tools_image

GRANT = '''
[[grant]]
id = "time-now"
tool = "mcp.time.get_current_time"
mode = "allow"
'''


def source_text(image: str) -> str:
    return server_toml(
        image, ["/usr/bin/python3", "-m", "mcp_server_time", "--local-timezone", "UTC"],
        server="time", env={"PYTHONPATH": "/opt/mcp/time"}, untrusted=True,
        protocol="2025-11-25")


def podman_home(image: str) -> Home:
    home = Home(runner="podman", grants={"time.toml": GRANT}, fsync=False)
    text = home.config.read_text().replace(
        'kind = "podman"\n', f'kind = "podman"\nimage = "{tools_image()}"\n'
                             "timeout_ms = 120000\n")
    home.config.write_text(text)
    (home.home / "sources").mkdir()
    (home.home / "sources" / "time.toml").write_text(source_text(image))
    return home


def live_tools(image: str) -> list[dict[str, Any]]:
    state = parse_source_texts({"time.toml": source_text(image)})
    assert isinstance(state, SourceSet), state
    names = iter(f"boxmaker-test{os.getpid()}-mcp-time-p{n}" for n in range(1, 3))

    async def probe() -> list[dict[str, Any]]:
        with trio.fail_after(300):
            found = await probe_mcp_server(_podman_launcher(tools_image()), state.servers["time"],
                                           lambda: next(names), version="0.test")
        assert found.listed is not None, found.problem
        return list(found.listed.tools)

    return trio.run(probe)


@pytest.mark.podman
@pytest.mark.parametrize("drift", [False, True])
def test_mcp_calls_through_brokerd_and_podman(drift: bool) -> None:
    image = mcp_image()
    tools = live_tools(image)
    if drift:  # the owner pinned a description the server no longer serves
        tools = [{**t, "description": "Changed."} if t["name"] == "get_current_time" else t
                 for t in tools]
    home = podman_home(image)
    try:
        state = parse_source_texts({"time.toml": source_text(image)})
        assert isinstance(state, SourceSet)
        pin = make_pin(server="time", protocol="2025-11-25", source=pin_source(
            state.servers["time"]), tools=pin_tools(tools, ()), server_info=None,
            instructions=None, pinned_at="2026-12-02T10:00:00.000000Z", by=os.getuid())
        pin_in_log(home, pin)
        proc = start(home)
        try:
            granted = request(home.broker, call_request(
                "s1", "mcp.time.get_current_time", {"timezone": "UTC"}), timeout=240)
            ungranted = request(home.broker, call_request(
                "s1", "mcp.time.convert_time", {"source_timezone": "UTC", "time": "10:00",
                                                "target_timezone": "UTC"}))
            after = request(home.broker, call_request(
                "s1", "mcp.time.get_current_time", {"timezone": "UTC"}), timeout=240)
        finally:
            assert proc.stop() == 0, proc.log()
        # After a drift the server is unpinned: nothing of it is offered any more.
        assert ungranted[-1]["denied"]["code"] == ("source_unpinned" if drift else "no_grant")
        (result, *_) = home.events("result")
        source = result["source"]
        assert source["kind"] == "mcp" and source["server"] == "time"
        assert source["mcp_name"] == "get_current_time" and source["protocol"] == "2025-11-25"
        if drift:
            assert granted[-1]["denied"]["code"] == "pin_mismatch"
            assert granted[-1]["denied"]["runbook"] == "docs/runbook.md#pin-mismatch"
            assert result["status"] == "pin_mismatch" and result["output"] is None
            assert source["request_sha256"] is None
            assert source["list_digest"] != pin.digest
            (drifted,) = home.events("mcp_server")
            assert drifted["event"] == "drifted" and drifted["drift"]["changed"] == [
                "get_current_time"]
            assert after[-1]["denied"]["code"] == "source_unpinned"
        else:
            answer = granted[-1]["result"]
            assert answer["status"] == "ok" and answer["label"] == "private"
            assert answer["untrusted"] is True
            assert "UTC" in answer["output"]["content"][0]["text"]
            assert result["status"] == "ok" and result["state"] == {"label": "private",
                                                                    "untrusted": True}
            assert source["list_digest"] == pin.digest and source["is_error"] is False
            call_line = canonical_bytes({"id": f"bx-call-{result['call']}", "jsonrpc": "2.0",
                                         "method": "tools/call", "params": {
                                             "arguments": {"timezone": "UTC"},
                                             "name": "get_current_time"}})
            assert source["request_sha256"] == sha256_hex(call_line)
            decision = home.events("decision")[0]
            assert decision["pin"] == pin.digest and "effective_args" not in decision
            # The result raised the session to the server's label: the grant (max_label
            # public by default) no longer applies.
            assert after[-1]["denied"]["code"] == "taint"
        verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                                capture_output=True, text=True, env=env_for(home),
                                check=False, timeout=120)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        home.cleanup()


