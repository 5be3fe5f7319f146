"""loopd's inference client against the real llama-server (Gemma 3 270M, CPU).

Few tokens per request: the point is the wire (health, props, slots, a
streamed answer, slot files, a cancelled stream), not the model's prose.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._http import ChatDelta, FinishDelta, TextDelta, Timeouts, chat_request_body
from boxmaker._http.client import LlamaClient
from tests.conftest import REPO
from tests.e2e.conftest import SLOTS, LlamaServer, wait_slot_idle

pytestmark = pytest.mark.llama

TIMEOUTS = Timeouts(connect_s=10, first_event_s=120, idle_s=60, total_s=300)


def client(server: LlamaServer) -> LlamaClient:
    return LlamaClient(server.endpoint, timeouts=TIMEOUTS)


def chat_body(text: str, *, slot: int = 0, max_tokens: int = 8, **extra: Any) -> bytes:
    body = json.loads(chat_request_body([{"role": "user", "content": text}], model="local",
                                        slot=slot, temperature=0.0))
    body["max_tokens"] = max_tokens
    body.update(extra)
    return json.dumps(body).encode()


async def test_health_props_and_slots(llama_server: LlamaServer) -> None:
    llama = client(llama_server)
    with trio.fail_after(60):
        assert await llama.health() == "ok"
        props = await llama.props()
        slots = await llama.slots()
    assert props.total_slots == SLOTS
    assert props.n_ctx == llama_server.n_ctx_per_slot == 4096
    assert props.supports_tool_calls is True  # the Qwen 2.5 template
    assert [slot.id for slot in slots] == list(range(SLOTS))
    assert all(slot.n_ctx == 4096 for slot in slots)


async def test_a_streamed_chat_completion(llama_server: LlamaServer) -> None:
    deltas: list[ChatDelta] = []
    with trio.fail_after(300):
        async with client(llama_server).chat(chat_body("Say hello to the owner.")) as stream:
            async for delta in stream:
                deltas.append(delta)
            result = stream.result()
    texts = [d for d in deltas if isinstance(d, TextDelta)]
    finishes = [d for d in deltas if isinstance(d, FinishDelta)]
    assert texts, deltas
    assert len(texts) > 1, "a streamed answer comes in pieces"
    assert [f.reason for f in finishes] in (["length"], ["stop"])
    assert result.text == "".join(d.text for d in texts) and result.text
    assert result.usage is not None and 0 < result.usage.completion_tokens <= 8
    assert result.timings is not None and result.timings.predicted_n == (
        result.usage.completion_tokens)


def write_loopd_toml(path: Path, server: LlamaServer, *, slots: int, n_ctx: int) -> Path:
    config = path / "loopd.toml"
    config.write_text(f"""home = "{path}"
[inference]
url = "{server.url}"
slots = {slots}
n_ctx_per_slot = {n_ctx}
load_timeout_s = 60
""")
    return config


def loopd_self_test(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from boxmaker.loopd._cli import main; main()",
                           "self-test", "--config", str(config)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_loopd_self_test_passes_against_the_real_server(llama_server: LlamaServer,
                                                        tmp_path: Path) -> None:
    result = loopd_self_test(write_loopd_toml(tmp_path, llama_server, slots=2, n_ctx=4096))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "self-test passed" in result.stdout
    assert "2 slots, n_ctx 4096 per slot" in result.stdout


def test_loopd_self_test_names_a_mismatch(llama_server: LlamaServer, tmp_path: Path) -> None:
    result = loopd_self_test(write_loopd_toml(tmp_path, llama_server, slots=4, n_ctx=8192))
    assert result.returncode == 1
    assert "expected 4" in result.stderr and "found total_slots 2" in result.stderr
    assert "found default_generation_settings.n_ctx 4096" in result.stderr
    assert result.stderr.strip().endswith("docs/runbook.md#inference-mismatch")


async def test_slot_save_and_restore_bring_the_prompt_back_from_the_cache(
    llama_server: LlamaServer,
) -> None:
    llama = client(llama_server)
    prompt = "List three colours of the rainbow, one per line."
    with trio.fail_after(300):
        async with llama.chat(chat_body(prompt, slot=1, max_tokens=4)) as stream:
            async for _ in stream:
                pass
            first = stream.result()
        saved = await llama.save_slot(1, "e2e-slot.bin")
        erased = await llama.erase_slot(1)
        restored = await llama.restore_slot(1, "e2e-slot.bin")
        async with llama.chat(chat_body(prompt, slot=1, max_tokens=4)) as stream:
            async for _ in stream:
                pass
            again = stream.result()
    assert saved.id_slot == 1 and saved.tokens is not None and saved.tokens > 0
    assert (llama_server.slot_dir / "e2e-slot.bin").is_file()
    assert erased.id_slot == 1
    assert restored.tokens == saved.tokens
    assert first.timings is not None and again.timings is not None
    assert again.timings.cache_n > 0, "the restored slot served the prompt from its cache"
    assert again.timings.prompt_n < first.timings.prompt_n


async def test_a_cancelled_stream_stops_the_generation_and_the_server_goes_on(
    llama_server: LlamaServer,
) -> None:
    llama = client(llama_server)
    with trio.fail_after(300):
        # 2000 tokens with the end of text ignored: minutes of work unless cancelled
        async with llama.chat(chat_body("Write a long story about a lighthouse.",
                                        max_tokens=2000, ignore_eos=True)) as stream:
            async for delta in stream:
                if isinstance(delta, TextDelta):
                    break  # leaving the block closes the connection mid-stream
        await wait_slot_idle(llama, 0, within_s=20)
        assert await llama.health() == "ok"
        async with llama.chat(chat_body("Say yes.", max_tokens=2)) as stream:
            async for _ in stream:
                pass
            result = stream.result()
    assert result.finish_reason in ("length", "stop")
