"""`boxmaker up` with the starter time server, for real (issue 26 item 2): up writes
sources/time.toml with the MCP image, shows the probed tools through `bxctl mcp
pin` on its terminal, pins on the owner's yes; `bxctl mcp list` shows `time`
pinned, the chat's banner and `/help` list its tools, and one chat turn (the scripted fake
llama-server calling `mcp__time__get_current_time`) makes a call that the audit
log records as the MCP server's.  The other ends of the first pin: without a terminal
up does not ask and says how to pin; on the owner's no nothing is pinned; a second up
on a pinned home asks nothing and the pin holds.  Real podman, the tools and MCP
images."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.fakes.podman import mcp_image, tools_image
from tests.fakes.pty import Pty

REPO = Path(__file__).resolve().parents[2]
BOXMAKER = Path(sys.executable).parent / "boxmaker"
BXCTL = Path(sys.executable).parent / "bxctl"
QUESTION = b"? [y/N]"
ADVICE = ("boxmaker: the time server is not pinned: run `bxctl mcp pin time` to review its "
          "tools and pin it")
NOT_PINNED = "boxmaker: not pinned: its tools are not offered; `bxctl mcp pin time` pins it later"
BANNER_TOOLS = "MCP tools: mcp.time.convert_time, mcp.time.get_current_time"
CALLS_TIME = [
    {"steps": [{"role": "assistant"},
               {"tool_call": {"index": 0, "id": "c1", "name": "mcp__time__get_current_time",
                              "arguments": [json.dumps({"timezone": "UTC"})]}},
               {"finish": "tool_calls"}, {"usage": True}]},
    {"steps": [{"role": "assistant"}, {"text": "It is now, in UTC."},
               {"finish": "stop"}, {"usage": True}]},
]


def _audit(home: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((home / "audit").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


@attrs.frozen
class UpHome:
    """A home for `boxmaker up` (made by the first up), the owner's $HOME in `env`, and
    the fake llama-server's URL."""

    home: Path
    env: dict[str, str]
    url: str

    def argv(self, *more: str) -> list[str]:
        return [str(BOXMAKER), "up", "--home", str(self.home), "--inference", self.url, *more]

    def up(self) -> Pty:
        """`boxmaker up` on a terminal, as the owner runs it."""
        return Pty(self.argv(), env=self.env)

    def servers(self) -> list[dict[str, Any]]:
        """`bxctl mcp list --json`, asked of the running brokerd."""
        listed = subprocess.run([str(BXCTL), "--config", str(self.home / "bxctl.toml"), "mcp",
                                 "list", "--json"], capture_output=True, text=True,
                                env=self.env, check=False, timeout=60)
        assert listed.returncode == 0, listed.stderr
        servers: list[dict[str, Any]] = json.loads(listed.stdout)["servers"]
        return servers

    def pin_records(self) -> list[dict[str, Any]]:
        return [r["mcp_pin"] for r in _audit(self.home) if "mcp_pin" in r]

    def pin_files(self) -> list[str]:
        pins = self.home / "audit" / "pins"
        return sorted(p.name for p in pins.iterdir()) if pins.is_dir() else []


@pytest.fixture
def up_home() -> Iterator[Callable[[list[dict[str, Any]]], UpHome]]:
    """A fresh home and $HOME, and the fake llama-server answering `turns`."""
    llamas: list[subprocess.Popen[str]] = []

    def make(turns: list[dict[str, Any]]) -> UpHome:
        tools_image()
        mcp_image()
        root = Path(tempfile.mkdtemp(prefix="bxupm", dir="/tmp"))
        (root / "user").mkdir()
        script = root / "llama.json"
        script.write_text(json.dumps({
            "props": {"total_slots": 2, "n_ctx": 4096, "supports_tool_calls": True},
            "turns": turns,
        }))
        llama = subprocess.Popen([sys.executable, "-m", "tests.fakes.llama_server", "--script",
                                  str(script), "--port", "0"], cwd=REPO,
                                 stdout=subprocess.PIPE, text=True)
        llamas.append(llama)
        assert llama.stdout is not None
        line = llama.stdout.readline()
        assert line.startswith("listening on http://"), line
        env = dict(os.environ, HOME=str(root / "user"), COLUMNS="200")
        env.pop("XDG_RUNTIME_DIR", None)
        env.pop("BOXMAKER_HOME", None)
        return UpHome(home=root / "home", env=env,
                      url=line.split("listening on ", 1)[1].strip())

    yield make
    for llama in llamas:
        llama.terminate()
        llama.wait(timeout=30)
        if llama.stdout is not None:
            llama.stdout.close()


def _answer_yes(where: UpHome, up: Pty) -> None:
    """The first up on `where`: the probed tools, the question, the owner's yes, the chat."""
    # the probe's whole list, as `bxctl mcp pin` shows it, then its question
    screen = up.expect(QUESTION, timeout=400).decode(errors="replace")
    assert "the starter time server is not pinned yet" in screen
    assert "get_current_time" in screen and "convert_time" in screen
    up.type("y\n")
    screen = up.expect(b"you> ", timeout=120).decode(errors="replace")
    assert "pinned time " in screen
    assert BANNER_TOOLS in screen
    (view,) = where.servers()
    assert view["id"] == "time" and view["state"] == "pinned" and view["offered"] == 2


@pytest.mark.podman
def test_up_pins_the_starter_time_server_and_a_chat_turn_calls_it(
        up_home: Callable[[list[dict[str, Any]]], UpHome]) -> None:
    where = up_home(CALLS_TIME)
    up = where.up()
    try:
        _answer_yes(where, up)
        up.type("/help\n")
        up.expect(b"MCP tools the agent may ask for")
        screen = up.expect(b"  mcp.time.get_current_time  ").decode(errors="replace")
        assert "  mcp.time.convert_time  " in screen.split("MCP tools the agent may ask")[1]
        up.type("what time is it?\n")
        up.expect(b"It is now, in UTC.", timeout=300)
        up.expect(b"you> ")
    finally:
        code = up.close()
    assert code == 0, up.seen.decode(errors="replace")
    assert mcp_image() in (where.home / "sources" / "time.toml").read_text()
    results = [r["result"] for r in _audit(where.home) if "result" in r]
    mcp_results = [r for r in results if r["source"]["kind"] == "mcp"]
    assert len(mcp_results) == 1, results
    (result,) = mcp_results
    assert result["source"]["server"] == "time"
    assert result["source"]["mcp_name"] == "get_current_time"
    assert result["status"] == "ok", result


def _read_until(process: subprocess.Popen[bytes], needle: bytes, timeout: float) -> bytes:
    """What `process` wrote to its stdout pipe up to and with `needle`."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"never saw {needle!r}:\n{seen.decode(errors='replace')}")
        if select.select([fd], [], [], remaining)[0]:
            data = os.read(fd, 65536)
            if not data:
                raise AssertionError(f"up ended before {needle!r}:\n"
                                     f"{seen.decode(errors='replace')}")
            seen += data
    return seen


@pytest.mark.podman
def test_up_without_a_terminal_does_not_ask_and_says_how_to_pin(
        up_home: Callable[[list[dict[str, Any]]], UpHome]) -> None:
    where = up_home([])
    up = subprocess.Popen(where.argv("--no-chat"), env=where.env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True)
    assert up.stdout is not None
    try:
        seen = _read_until(up, b"all running; Ctrl-C stops them", timeout=400)
        (view,) = where.servers()
        assert view["id"] == "time" and view["state"] == "unpinned", view
        assert view["reason"] == "none" and view["offered"] == 0, view
    finally:
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=120)
        up.stdout.close()
    screen = (seen + rest).decode(errors="replace")
    assert up.returncode == 0, screen
    assert ADVICE in screen.splitlines()
    # no question, no probe: `bxctl mcp pin` never ran
    assert QUESTION.decode() not in screen and "here is what it serves" not in screen
    assert "get_current_time" not in screen
    assert where.pin_records() == [] and where.pin_files() == []


@pytest.mark.podman
def test_up_on_the_owners_no_pins_nothing(
        up_home: Callable[[list[dict[str, Any]]], UpHome]) -> None:
    where = up_home([])
    up = where.up()
    try:
        screen = up.expect(QUESTION, timeout=400).decode(errors="replace")
        assert "get_current_time" in screen and "convert_time" in screen
        up.type("n\n")
        screen = up.expect(b"you> ", timeout=120).decode(errors="replace")
        assert NOT_PINNED in screen
        assert "pinned time " not in screen and "MCP tools: " not in screen
        (view,) = where.servers()
        assert view["state"] == "unpinned" and view["reason"] == "none", view
        assert view["offered"] == 0
    finally:
        code = up.close()
    assert code == 0, up.seen.decode(errors="replace")
    assert up.seen.count(QUESTION) == 1
    assert where.pin_records() == [] and where.pin_files() == []


@pytest.mark.podman
def test_a_second_up_after_the_pin_asks_nothing_and_the_pin_holds(
        up_home: Callable[[list[dict[str, Any]]], UpHome]) -> None:
    where = up_home([])
    first = where.up()
    try:
        _answer_yes(where, first)
    finally:
        code = first.close()
    assert code == 0, first.seen.decode(errors="replace")
    (pinned,) = where.pin_records()
    assert pinned["action"] == "pinned" and pinned["server"] == "time"
    files = where.pin_files()
    assert files == [f"{pinned['digest']}.json"]
    up = where.up()
    try:
        screen = up.expect(b"you> ", timeout=400).decode(errors="replace")
        assert BANNER_TOOLS in screen
        (view,) = where.servers()
        assert view["state"] == "pinned" and view["pin"] == pinned["digest"], view
        assert view["offered"] == 2
    finally:
        code = up.close()
    screen = up.seen.decode(errors="replace")
    assert code == 0, screen
    assert QUESTION.decode() not in screen and "not pinned" not in screen
    assert "here is what it serves" not in screen
    assert where.pin_records() == [pinned] and where.pin_files() == files
