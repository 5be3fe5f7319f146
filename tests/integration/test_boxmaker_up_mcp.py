"""`boxmaker up` with the starter time server, for real (issue 26 item 2): up writes
sources/time.toml with the MCP image, shows the probed tools through `bxctl mcp
pin` on its terminal, pins on the owner's yes; `bxctl mcp list` shows `time`
pinned, the chat's banner and `/help` list its tools, and one chat turn (the scripted fake
llama-server calling `mcp__time__get_current_time`) makes a call that the audit
log records as the MCP server's.  Real podman, the tools and MCP images."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fakes.podman import mcp_image, tools_image
from tests.fakes.pty import Pty

REPO = Path(__file__).resolve().parents[2]
BOXMAKER = Path(sys.executable).parent / "boxmaker"
BXCTL = Path(sys.executable).parent / "bxctl"


def _fake_llama(script: Path) -> subprocess.Popen[str]:
    script.write_text(json.dumps({
        "props": {"total_slots": 2, "n_ctx": 4096, "supports_tool_calls": True},
        "turns": [
            {"steps": [{"role": "assistant"},
                       {"tool_call": {"index": 0, "id": "c1",
                                      "name": "mcp__time__get_current_time",
                                      "arguments": [json.dumps({"timezone": "UTC"})]}},
                       {"finish": "tool_calls"}, {"usage": True}]},
            {"steps": [{"role": "assistant"}, {"text": "It is now, in UTC."},
                       {"finish": "stop"}, {"usage": True}]},
        ],
    }))
    return subprocess.Popen([sys.executable, "-m", "tests.fakes.llama_server", "--script",
                             str(script), "--port", "0"], cwd=REPO, stdout=subprocess.PIPE,
                            text=True)


def _audit(home: Path) -> list[dict[str, object]]:
    records = []
    for path in sorted((home / "audit").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


@pytest.mark.podman
def test_up_pins_the_starter_time_server_and_a_chat_turn_calls_it() -> None:
    tools_image()
    image = mcp_image()
    root = Path(tempfile.mkdtemp(prefix="bxupm", dir="/tmp"))
    home, user = root / "home", root / "user"
    user.mkdir()
    llama = _fake_llama(root / "llama.json")
    assert llama.stdout is not None
    line = llama.stdout.readline()
    assert line.startswith("listening on http://"), line
    url = line.split("listening on ", 1)[1].strip()
    env = dict(os.environ, HOME=str(user), COLUMNS="200")
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("BOXMAKER_HOME", None)
    up = Pty([str(BOXMAKER), "up", "--home", str(home), "--inference", url], env=env)
    try:
        # the probe's whole list, as `bxctl mcp pin` shows it, then its question
        screen = up.expect(b"? [y/N]", timeout=400).decode(errors="replace")
        assert "the starter time server is not pinned yet" in screen
        assert "get_current_time" in screen and "convert_time" in screen
        up.type("y\n")
        screen = up.expect(b"you> ", timeout=120).decode(errors="replace")
        assert "pinned time " in screen
        assert "MCP tools: mcp.time.convert_time, mcp.time.get_current_time" in screen
        listed = subprocess.run([str(BXCTL), "--config", str(home / "bxctl.toml"), "mcp",
                                 "list", "--json"], capture_output=True, text=True,
                                env=env, check=False, timeout=60)
        assert listed.returncode == 0, listed.stderr
        (view,) = json.loads(listed.stdout)["servers"]
        assert view["id"] == "time" and view["state"] == "pinned" and view["offered"] == 2
        up.type("/help\n")
        up.expect(b"MCP tools the agent may ask for")
        screen = up.expect(b"  mcp.time.get_current_time  ").decode(errors="replace")
        assert "  mcp.time.convert_time  " in screen.split("MCP tools the agent may ask")[1]
        up.type("what time is it?\n")
        up.expect(b"It is now, in UTC.", timeout=300)
        up.expect(b"you> ")
    finally:
        code = up.close()
        llama.terminate()
        llama.wait(timeout=30)
        llama.stdout.close()
    assert code == 0, up.seen.decode(errors="replace")
    assert image in (home / "sources" / "time.toml").read_text()
    results = [r["result"] for r in _audit(home) if "result" in r]
    mcp_results = [r for r in results if r["source"]["kind"] == "mcp"]  # type: ignore[index]
    assert len(mcp_results) == 1, results
    (result,) = mcp_results
    assert result["source"]["server"] == "time"  # type: ignore[index]
    assert result["source"]["mcp_name"] == "get_current_time"  # type: ignore[index]
    assert result["status"] == "ok", result
