"""Tool-source tools in a turn (12-tool-sources "loopd"): loopd served in process over
a real loop.sock, the scripted fake llama-server, and the real brokerd whose MCP
servers are the test MCP server behind the stand-in podman (tests/brokerd/_mcp_home).

A turn offers the pinned tools `[loop] tools` names after the built-ins, under
their model names; the model's call is mapped back to boxmaker's name, decided,
run and recorded; a drifted server's call ends `tool_denied pin_mismatch`, a
broken one's `source_unavailable`, each with a fixed text for the model; a name
that is not offered goes to brokerd as it is (`unknown_tool`).  loopd's status
lists the offered tools (`mcp_tools`, for the chat's banner).  Without brokerd
the turn offers the built-ins only and loopd logs why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._error_table import MODEL_TEXT
from boxmaker.loopd._config import load_config
from boxmaker.loopd._serve import serve
from tests.brokerd._mcp_home import fake_mcp_home
from tests.fakes.brokerd import BrokerdProcess, Home, start
from tests.fakes.llama_server import FakeLlamaServer
from tests.loopd.test_serve import PROPS, UID, Loop, say, text_turn

LOOP_TOOLS = ["echo", "mcp.good.*", "mcp.drifty.echo", "mcp.broken.*"]


def calls_turn(*calls: tuple[str, str]) -> dict[str, Any]:
    """One round in which the model calls each (id, model name) with {"text": "hi"}."""
    steps: list[dict[str, Any]] = [{"role": "assistant"}]
    steps += [{"tool_call": {"index": n, "id": call_id, "name": name,
                             "arguments": ['{"text": "hi"}']}}
              for n, (call_id, name) in enumerate(calls)]
    return {"steps": [*steps, {"finish": "tool_calls"}, {"usage": True}]}


@pytest.fixture
def brokerd() -> Iterator[tuple[Home, BrokerdProcess]]:
    home = fake_mcp_home({"good": [], "drifty": ["description"], "broken": ["exit_list"]})
    proc = start(home)
    yield home, proc
    proc.stop()
    home.cleanup()


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def start_loop(nursery: trio.Nursery, root: Path, broker: Path,
                     turns: list[dict[str, Any]]) -> Loop:
    fake = FakeLlamaServer({"props": PROPS, "turns": turns})
    await nursery.start(partial(fake.serve, unix_socket=root / "llama.sock"))
    path = root / "loopd.toml"
    path.write_text(
        f'home = "{root / "home"}"\n'
        f'socket = "{root / "run" / "loop.sock"}"\n'
        f"owner_uids = [{UID}]\n"
        "[inference]\n"
        f'socket = "{root / "llama.sock"}"\n'
        "[broker]\n"
        f'socket = "{broker}"\n'
        "timeout_ms = 60000\n"
        "[loop]\n"
        f"tools = {json.dumps(LOOP_TOOLS)}\n")
    config = load_config(path)
    await nursery.start(partial(serve, config))
    return Loop(root, fake, config)


def offered(fake: FakeLlamaServer, request: int) -> list[str]:
    return [t["function"]["name"] for t in fake.chat_bodies[request]["tools"]]


def events(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f["event"][kind] for f in frames if kind in f.get("event", {})]


async def test_a_turn_offers_maps_back_and_runs_mcp_tools(
        tmp_path: Path, nursery: trio.Nursery, brokerd: tuple[Home, BrokerdProcess]) -> None:
    home, _proc = brokerd
    loop = await start_loop(nursery, tmp_path, home.broker, [
        calls_turn(("t1", "mcp__good__echo")), text_turn("done"),
        calls_turn(("t2", "mcp__drifty__echo"), ("t3", "mcp__broken__echo"),
                   ("t4", "mcp__nope__echo")), text_turn("sorry")])
    with trio.fail_after(120):
        [status] = await loop.ask({"v": 1, "id": 3, "status": {}})
        first = await loop.ask(say(1, "echo hi"))
        second = await loop.ask(say(2, "again", conversation="c2"))
    # After the built-ins, in the answer's order (servers by id, tools by local name);
    # the broken server is named (mcp.broken.*) and offered: it is pinned.
    expected = ["echo", "mcp__broken__add", "mcp__broken__echo", "mcp__drifty__echo",
                "mcp__good__add", "mcp__good__echo"]
    assert offered(loop.fake, 0) == expected and offered(loop.fake, 1) == expected
    # loopd's status carries the same list for the chat's banner and /help
    shown = status["status"]["mcp_tools"]
    assert [t["model_name"] for t in shown] == expected[1:]
    assert shown[-1] == {"name": "mcp.good.echo", "model_name": "mcp__good__echo",
                         "description": "Echo the text back."}
    (call,) = events(first, "tool_call")
    assert call["tool"] == "mcp.good.echo"  # boxmaker's name toward the owner
    (result,) = events(first, "tool_result")
    assert result["status"] == "ok" and result["label"] == "private"
    history = loop.config.conversations / "c1.jsonl"
    messages = [json.loads(line) for line in history.read_text().splitlines()]
    assert messages[1]["tool_calls"][0]["name"] == "mcp__good__echo"  # the model's own name
    assert json.loads(messages[2]["content"])["output"]["content"][0]["text"] == "hi"
    denied = {d["call_id"]: d for d in events(second, "tool_denied")}
    assert denied["t2"]["tool"] == "mcp.drifty.echo" and denied["t2"]["code"] == "pin_mismatch"
    assert denied["t2"]["runbook"] == "docs/runbook.md#pin-mismatch"
    assert denied["t3"]["code"] == "source_unavailable"
    assert denied["t3"]["runbook"] == "docs/runbook.md#source-unavailable"
    assert denied["t4"]["tool"] == "mcp__nope__echo" and denied["t4"]["code"] == "unknown_tool"
    told = {m["tool_call_id"]: m["content"] for m in map(json.loads, (
        loop.config.conversations / "c2.jsonl").read_text().splitlines())
        if m["role"] == "tool"}
    assert told["t2"].startswith(MODEL_TEXT["pin_mismatch"])
    assert told["t3"].startswith(MODEL_TEXT["source_unavailable"])
    assert all(denied[c]["reason"] not in told[c] for c in ("t2", "t3"))  # never the reason
    assert [c["tool"] for c in home.events("call")] == [
        "mcp.good.echo", "mcp.drifty.echo", "mcp.broken.echo", "mcp__nope__echo"]


async def test_without_brokerd_a_turn_offers_the_built_ins_and_logs_why(
        tmp_path: Path, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="boxmaker.loopd")
    loop = await start_loop(nursery, tmp_path, tmp_path / "no-brokerd" / "broker.sock",
                            [text_turn("hello")])
    with trio.fail_after(60):
        [status] = await loop.ask({"v": 1, "id": 3, "status": {}})
        frames = await loop.ask(say(1))
    assert "mcp_tools" not in status["status"]
    assert frames[-1]["done"]["finish"] == "stop"
    assert offered(loop.fake, 0) == ["echo"]
    (line,) = [r.getMessage() for r in caplog.records if "tools query" in r.getMessage()]
    assert "built-in tools only" in line and "is missing" in line
