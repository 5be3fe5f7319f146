"""scripts/bench/prefix against the scripted fake llama-server (the run itself needs the
real model: it is a benchmark, not a test): the order of loopd's old and new steps, and
the prompt subset spread over the kinds."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from boxmaker._http.client import LlamaClient
from tests.conftest import REPO
from tests.fakes.llama_server import FakeLlamaServer

SCRIPT = REPO / "scripts" / "bench" / "prefix"


def _bench() -> Any:
    loader = importlib.machinery.SourceFileLoader("bench_prefix", str(SCRIPT))
    spec = importlib.util.spec_from_loader("bench_prefix", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_prefix"] = module
    loader.exec_module(module)
    return module


def test_the_subset_takes_each_kind_in_turn() -> None:
    bench = _bench()
    prompts = [{"kind": k, "text": f"{k}{i}"} for k in ("list", "read", "chat")
               for i in range(3)]
    assert [p["text"] for p in bench.pick(prompts, 5)] == ["list0", "read0", "chat0",
                                                           "list1", "read1"]


async def test_before_empties_the_slot_after_keeps_the_previous_conversation(
        tmp_path: Path) -> None:
    bench = _bench()
    turn = {"steps": [{"role": "assistant"}, {"text": "x"}, {"finish": "length",
                                                             "timings": True},
                      {"usage": True}]}
    fake = FakeLlamaServer({"default_turn": turn})
    async with trio.open_nursery() as nursery:
        endpoint = await nursery.start(partial(fake.serve, unix_socket=tmp_path / "l.sock"))
        runner = bench.Bench(LlamaClient(endpoint), "core", "m")
        await runner.run(["one", "two"])
        nursery.cancel_scope.cancel()
    steps = [(r.target.removeprefix("/slots/0?action="),
              json.loads(r.body).get("filename") or json.loads(r.body)["messages"][-1]["content"])
             for r in fake.requests]
    assert steps == [
        ("/v1/chat/completions", "Hello!"), ("save", "bench-conv-0.bin"),
        ("restore", "bench-new-1.bin"), ("/v1/chat/completions", "one"),
        ("save", "bench-conv-1.bin"),
        ("restore", "bench-conv-0.bin"), ("/v1/chat/completions", "one"),
        ("/v1/chat/completions", bench.FOLLOW_UP),
        ("restore", "bench-new-2.bin"), ("/v1/chat/completions", "two"),
        ("save", "bench-conv-2.bin"),
        ("restore", "bench-conv-1.bin"), ("/v1/chat/completions", "two"),
        ("/v1/chat/completions", bench.FOLLOW_UP),
    ]
    bodies = [json.loads(r.body) for r in fake.requests if r.target == "/v1/chat/completions"]
    assert all(b["max_tokens"] == 1 and b["id_slot"] == 0 and b["cache_prompt"] for b in bodies)
    assert all(b["messages"][0] == {"role": "system", "content": "core"} for b in bodies)
    assert [len(runner.rows[m]) for m in bench.MODES] == [2, 2, 2]
