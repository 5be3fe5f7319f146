"""scripts/bench/model's scoring of one turn (the run itself needs the real model:
it is a benchmark, not a test): what counts is the `call` records brokerd kept."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from boxmaker.stack._home import write_starter_home
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "bench" / "model"


def _bench() -> Any:
    loader = importlib.machinery.SourceFileLoader("bench_model", str(SCRIPT))
    spec = importlib.util.spec_from_loader("bench_model", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_model"] = module
    loader.exec_module(module)
    return module


def _frames(text: str, finish: str,
            events: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = [{"id": 1, "event": e} for e in events or []]
    frames += [{"id": 1, "event": {"text": {"delta": piece}}}
               for piece in (text[: len(text) // 2], text[len(text) // 2:])]
    frames.append({"id": 1, "done": {"finish": finish, "rounds": 1,
                                     "usage": {"prompt_tokens": 1, "completion_tokens": 1}}})
    return json.loads(json.dumps(frames))


RESULT = {"tool_result": {"call_id": "c0", "tool": "read_file", "status": "ok", "bytes": 9,
                          "label": "private", "untrusted": False}}
READ = {"kind": "read", "text": "Read hello.md", "expect": {"tool": "read_file",
                                                            "path": "/u/notes/hello.md"},
        "uses": ["demo notes"]}


def test_a_recorded_right_call_whose_result_is_used_counts_both() -> None:
    bench = _bench()
    records = [{"session": "bench-1", "tool": "read_file", "args": {"path": "/u/notes/hello.md"}}]
    row = bench.score(READ, READ["expect"], _frames("It says: Demo notes.", "stop", [RESULT]),
                      records)
    assert (row["right"], row["result"], row["calls"], row["repeat"]) == (1, 1, 1, 0)


def test_a_call_only_written_as_text_is_not_a_call() -> None:
    bench = _bench()
    text = '```json\n{"name": "read_file", "arguments": {"path": "/u/notes/hello.md"}}\n```'
    row = bench.score(READ, READ["expect"], _frames(text, "stop"), [])
    assert (row["right"], row["result"], row["calls"]) == (0, 0, 0)


def test_the_wrong_path_or_host_is_not_right() -> None:
    bench = _bench()
    wrong = [{"tool": "read_file", "args": {"path": "/etc/passwd"}}]
    assert bench.score(READ, READ["expect"], _frames("no", "stop"), wrong)["right"] == 0
    expect = {"tool": "http_fetch", "url_host": "docs.python.org"}
    fetch = {"kind": "fetch", "text": "Fetch it", "expect": expect}
    good = [{"tool": "http_fetch", "args": {"url": "https://docs.python.org/3/library/json.html"}}]
    bad = [{"tool": "http_fetch", "args": {"url": "https://docs.python.org.evil.example/"}}]
    denied = {"tool_denied": {"call_id": "c0", "tool": "http_fetch", "code": "refused",
                              "reason": "benchmark", "runbook": None}}
    assert bench.score(fetch, expect, _frames("ok", "stop", [denied]), good)["result"] == 1
    assert bench.score(fetch, expect, _frames("ok", "stop", [denied]), bad)["right"] == 0


def test_a_repeat_notice_puts_the_result_in_front_of_the_owner() -> None:
    bench = _bench()
    notice = {"notice": {"kind": "repeat", "call_id": "c1", "tool": "read_file",
                         "text": "read_file ok (not run again; its earlier result): # Demo notes"}}
    records = [{"tool": "read_file", "args": {"path": "/u/notes/hello.md"}}]
    row = bench.score(READ, READ["expect"], _frames("", "repeat", [RESULT, notice]), records)
    assert (row["right"], row["result"], row["repeat"]) == (1, 1, 1)


def test_a_result_notice_counts_and_is_counted_apart() -> None:
    bench = _bench()
    notice = {"notice": {"kind": "result", "call_id": "c0", "tool": "read_file",
                         "text": "read_file ok, its result: # Demo notes"}}
    records = [{"tool": "read_file", "args": {"path": "/u/notes/hello.md"}}]
    frames = _frames("I read it.", "stop", [RESULT])
    frames.insert(-1, {"id": 1, "event": notice})
    row = bench.score(READ, READ["expect"], frames, records)
    assert (row["right"], row["result"], row["shown"]) == (1, 1, 1)
    quoted = bench.score(READ, READ["expect"],
                         _frames("It says: Demo notes.", "stop", [RESULT]), records)
    assert (quoted["result"], quoted["shown"]) == (1, 0)
    cut = {"notice": {"kind": "cut_call", "call_id": None, "tool": None, "text": "# Demo notes"}}
    ignored = bench.score(READ, READ["expect"], _frames("I read it.", "stop", [RESULT, cut]),
                          records)
    assert (ignored["result"], ignored["shown"]) == (0, 0)


def test_the_prompts_are_twenty_tool_ten_chat_four_no_call() -> None:
    prompts = json.loads((REPO / "fixtures" / "bench" / "model-prompts.json").read_text())
    kinds = [p["kind"] for p in prompts["prompts"]]
    assert sum(k in ("list", "read", "fetch", "write") for k in kinds) == 20
    assert kinds.count("chat") == 10 and kinds.count("no_call") == 4


def test_the_subset_per_kind() -> None:
    bench = _bench()
    prompts = [{"kind": k, "n": i} for k in ("list", "read", "no_call") for i in range(3)]
    assert [(p["kind"], p["n"]) for p in bench.per_kind(prompts, "1")] == [
        ("list", 0), ("read", 0), ("no_call", 0)]
    assert [(p["kind"], p["n"]) for p in bench.per_kind(prompts, "no_call=3,read=1")] == [
        ("read", 0), ("no_call", 0), ("no_call", 1), ("no_call", 2)]


def test_the_notes_core_is_the_starter_without_the_home_line(tmp_path: Path,
                                                             monkeypatch: Any) -> None:
    bench = _bench()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    write_starter_home(tmp_path / "home", upstream="http://127.0.0.1:8080", temperature=0.0)
    starter = (tmp_path / "home" / "core.md").read_text()
    notes = bench.without_home_line(starter)
    assert "The owner's home directory, ~, is " in starter
    assert "~" not in notes and len(notes.splitlines()) == len(starter.splitlines()) - 1
    assert bench.Candidate("qwen2.5-coder-1.5b::notes").core == "notes"
