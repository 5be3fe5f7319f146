"""What broker.sock answers of an `mcp.*` call that did not run, through the real
brokerd (12-tool-sources "Results and taint"): the hand-written test MCP server
(tests/fakes/mcp_stdio_server.py) behind a stand-in podman (tests/fakes/
podman_mcp.py; the wall's own tests use the real one).

A server that serves another list than the pin is denied `pin_mismatch`
(`#pin-mismatch`), one that exits before listing is `error source_unavailable`
(`#source-unavailable`); each is recorded with that status, output null, the
session's taint unchanged, and the log verifies.  A well-behaved server's call
is answered `result` and raises the taint, so the two above can be told apart
from a runner that runs nothing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerd._mcp_home import fake_mcp_home
from tests.fakes.brokerd import BXCTL, Home, call_request, env_for, request, start

SERVERS = {"good": [], "drifty": ["description"], "broken": ["exit_list"]}


@pytest.fixture
def home() -> Iterator[Home]:
    made = fake_mcp_home(SERVERS)
    yield made
    made.cleanup()


def answer_of(home: Home, server: str, session: str) -> dict[str, Any]:
    (answer,) = request(home.broker, call_request(session, f"mcp.{server}.echo",
                                                  {"text": "hi"}), timeout=120)
    return answer


def test_pin_mismatch_is_a_denial_and_source_unavailable_an_error(home: Home) -> None:
    proc = start(home)
    try:
        drifted = answer_of(home, "drifty", "s1")
        broken = answer_of(home, "broken", "s2")
        good = answer_of(home, "good", "s3")
    finally:
        assert proc.stop() == 0, proc.log()
    assert drifted["denied"]["code"] == "pin_mismatch"
    assert drifted["denied"]["runbook"] == "docs/runbook.md#pin-mismatch"
    assert drifted["denied"]["grant"] == "drifty-echo"
    assert broken["error"]["code"] == "source_unavailable"
    assert broken["error"]["runbook"] == "docs/runbook.md#source-unavailable"
    assert "nothing ran" in broken["error"]["message"]
    assert good["result"]["status"] == "ok"
    assert good["result"]["output"]["content"][0]["text"] == "hi"
    results = {r["source"]["server"]: r for r in home.events("result")}
    public = {"label": "public", "untrusted": False}
    for server, status in (("drifty", "pin_mismatch"), ("broken", "source_unavailable")):
        assert results[server]["status"] == status
        assert results[server]["output"] is None
        assert results[server]["state"] == public  # nothing ran: the taint is unchanged
        assert results[server]["source"]["request_sha256"] is None
    assert results["good"]["state"] == {"label": "private", "untrusted": True}
    (drift,) = home.events("mcp_server")
    assert drift["server"] == "drifty" and drift["event"] == "drifted"
    verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                            capture_output=True, text=True, env=env_for(home),
                            check=False, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
