"""scripts/bench/model's scoring of one turn's frames (the run itself needs the real
model: it is a benchmark, not a test)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from typing import Any

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "bench" / "model"


def _bench() -> Any:
    loader = importlib.machinery.SourceFileLoader("bench_model", str(SCRIPT))
    spec = importlib.util.spec_from_loader("bench_model", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _frames(text: str, finish: str,
            calls: list[tuple[str, dict[str, str]]]) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = [{"id": 1, "event": {"text": {"delta": piece}}}
                                    for piece in (text[: len(text) // 2], text[len(text) // 2:])]
    for n, (tool, args) in enumerate(calls):
        frames.append({"id": 1, "event": {"tool_call": {"call_id": f"c{n}", "tool": tool,
                                                        "args": args, "raw_args": None}}})
    frames.append({"id": 1, "done": {"finish": finish, "rounds": 1,
                                     "usage": {"prompt_tokens": 1, "completion_tokens": 1}}})
    return json.loads(json.dumps(frames))


def test_a_good_answer_scores_clean() -> None:
    bench = _bench()
    row = bench.score("List my notes.", {"tool": "list_dir", "path": "/u/notes"},
                      _frames("There is one note, hello.md.", "stop",
                              [("list_dir", {"path": "/u/notes/"})]))
    assert (row["words"], row["tmpl"], row["echo"], row["limit"], row["calls"], row["right"]) == (
        1, 0, 0, 0, 1, 1)
    assert row["clean"] == 1


def test_garbage_is_counted() -> None:
    bench = _bench()
    prompt = "Good morning. How are you today?"
    row = bench.score(prompt, {"tool": "read_file", "path": "/u/notes/hello.md"},
                      _frames(f"{prompt}<|im_end|>\n<|im_start|>owner\n{prompt}<end_of_turn>",
                              "length", [("read_file", {"path": "/etc/passwd"})]))
    assert row["tmpl"] == 3 and row["echo"] == 1 and row["limit"] == 1
    assert row["calls"] == 1 and row["right"] == 0
    assert row["words"] == 1 and row["clean"] == 0


def test_a_fetch_is_right_only_on_the_expected_host() -> None:
    bench = _bench()
    expect = {"tool": "http_fetch", "url_host": "docs.python.org"}
    good = bench.score("Fetch it.", expect, _frames("Fetching.", "stop", [
        ("http_fetch", {"url": "https://docs.python.org/3/library/json.html"})]))
    bad = bench.score("Fetch it.", expect, _frames("Fetching.", "stop", [
        ("http_fetch", {"url": "https://docs.python.org.evil.example/"})]))
    assert good["right"] == 1 and bad["right"] == 0
    assert bench.score("Hi", None, _frames("ok", "stop", []))["words"] == 0
