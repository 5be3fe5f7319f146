"""brokerd.toml's bounds of issue 11: output limits that fit one frame, the run
queue's defaults, connection and argument limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boxmaker._brokerd_config import (
    ConfigError,
    default_max_concurrent,
    largest_output_max_bytes,
    mem_total_bytes,
    memory_bytes,
    parse_config,
)
from boxmaker.proto._convert import U64, U64_MAX, JsonObject
from boxmaker.proto._framing import MAX_FRAME
from boxmaker.proto.wire._wire_broker import Result, encode_broker_answer
from tests.brokerd.test_cli import brokerd
from tests.fakes.brokerd import Home


def config(text: str) -> object:
    return parse_config(text.encode(), None, own_uid=1000)


def test_the_largest_answer_of_the_largest_output_fits_one_frame() -> None:
    largest = largest_output_max_bytes()
    assert MAX_FRAME - 4096 < largest < MAX_FRAME
    # A tool_failed output is the toolkit's whole answer: at the limit, the frame fits ...
    message = "x" * (largest - len(json.dumps({"error": {"code": "c", "message": ""}},
                                              separators=(",", ":"))))
    output = {"error": {"code": "c", "message": message}}
    body = encode_broker_answer(U64(U64_MAX), Result(
        status="tool_failed", output=JsonObject(output), label="private", untrusted=True))
    assert len(body) <= MAX_FRAME
    # ... and one byte more would not.
    output["error"]["message"] += "x"
    body = encode_broker_answer(U64(U64_MAX), Result(
        status="tool_failed", output=JsonObject(output), label="private", untrusted=False))
    assert len(body) > MAX_FRAME


def test_a_too_large_output_limit_is_refused_at_load() -> None:
    largest = largest_output_max_bytes()
    config(f"[runner]\noutput_max_bytes = {largest}\n")
    with pytest.raises(ConfigError, match="would not fit one 8 MiB frame"):
        config(f"[runner]\noutput_max_bytes = {largest + 1}\n")
    with pytest.raises(ConfigError, match="output_max_bytes"):
        config("[runner]\noutput_max_bytes = 67108864\n")  # 64 MiB passed before issue 11


def test_check_config_refuses_a_too_large_output_limit() -> None:
    home = Home(runner_extra="output_max_bytes = 16777216\n")
    try:
        out = brokerd(home, "check-config", "--config", str(home.config))
        assert out.returncode == 1
        assert "output_max_bytes" in out.stderr and "8 MiB frame" in out.stderr
        assert out.stderr.strip().endswith("docs/runbook.md#brokerd-start-failed")
    finally:
        home.cleanup()


def test_queue_defaults() -> None:
    assert memory_bytes("256m") == 256 << 20 and memory_bytes("1g") == 1 << 30
    assert memory_bytes("512") == 512 and memory_bytes("0m") is None
    gib = 1 << 30
    assert default_max_concurrent("256m", mem_total=16 * gib, cpus=2) == 4  # 2 x CPUs
    assert default_max_concurrent("4g", mem_total=6 * gib, cpus=8) == 1  # memory
    assert default_max_concurrent("8g", mem_total=4 * gib, cpus=8) == 1  # at least 1
    assert default_max_concurrent("256m", mem_total=None, cpus=3) == 6
    default = config("")
    assert default.max_concurrent >= 1  # type: ignore[attr-defined]
    assert default.max_queued == 4 * default.max_concurrent  # type: ignore[attr-defined]
    assert default.queue_timeout_ms == 10_000  # type: ignore[attr-defined]
    assert default.max_connections == 256  # type: ignore[attr-defined]
    assert default.max_args_bytes == 1_179_648  # type: ignore[attr-defined]
    set_ = config("[runner]\nmax_concurrent = 3\n")
    assert set_.max_queued == 12  # type: ignore[attr-defined]


def test_mem_total_is_read(tmp_path: Path) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemFree:  10 kB\nMemTotal:       16337852 kB\n")
    assert mem_total_bytes(info) == 16337852 * 1024
    assert mem_total_bytes(tmp_path / "missing") is None


@pytest.mark.parametrize("text", [
    "[runner]\nmax_concurrent = 0\n",
    "[runner]\nmax_queued = -1\n",
    "[runner]\nqueue_timeout_ms = 0\n",
    "[sockets]\nmax_connections = 0\n",
    "[policy]\nmax_args_bytes = 1\n",
    "[policy]\nmax_args_bytes = 8388609\n",
])
def test_bounds_are_checked(text: str) -> None:
    with pytest.raises(ConfigError):
        config(text)


def test_pending_bounds_default_and_range() -> None:
    """issue 22 item 9: `[approvals] max_pending` and `max_pending_per_session`."""
    loaded = config("")
    assert (loaded.max_pending, loaded.max_pending_per_session) == (128, 16)  # type: ignore[attr-defined]
    loaded = config("[approvals]\nmax_pending = 4\nmax_pending_per_session = 4\n")
    assert (loaded.max_pending, loaded.max_pending_per_session) == (4, 4)  # type: ignore[attr-defined]
    for bad, match in [
        ("max_pending = 0", "approvals.max_pending: 0"),
        ("max_pending = 65537", "approvals.max_pending: 65537"),
        ("max_pending_per_session = 0", "max_pending_per_session: 0"),
        ("max_pending = 8\nmax_pending_per_session = 9", "max_pending_per_session: 9"),
        ("max_pending = true", "max_pending"),
        ("max_pending = \"8\"", "max_pending"),
        ("max_pending_per_sesion = 3", "max_pending_per_sesion"),
    ]:
        with pytest.raises(ConfigError, match=match):
            config(f"[approvals]\n{bad}\n")
