"""The self-test (boxmaker/loopd/_selftest.py): the steps against the fake in process.

`loopd self-test` end to end is in tests/loopd/test_selftest_cmd.py.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker._error_table import pointer_of
from boxmaker._http import Endpoint, InferenceTimeout, InferenceUnavailable, Props
from boxmaker._http.client import LlamaClient
from boxmaker.loopd._selftest import Expected, InferenceMismatch, check_props, self_test
from tests.fakes.llama_server import FakeLlamaServer

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Expected(slots=4, n_ctx_per_slot=262144, tools_offered=True)


def props(**kw: Any) -> Props:
    values = {"total_slots": 4, "n_ctx": 262144, "supports_tool_calls": True, **kw}
    return Props(**values)


def test_check_props_names_expected_and_found() -> None:
    assert check_props(props(), EXPECTED) == ()
    [slots] = check_props(props(total_slots=2), EXPECTED)
    assert "expected 4" in slots and "found total_slots 2" in slots
    [ctx] = check_props(props(n_ctx=4096), EXPECTED)
    assert "expected 262144" in ctx and "n_ctx 4096" in ctx
    [caps] = check_props(props(supports_tool_calls=False), EXPECTED)
    assert "supports_tool_calls true" in caps and "found false" in caps
    [missing] = check_props(props(supports_tool_calls=None), EXPECTED)
    assert "not reported" in missing
    no_tools = Expected(slots=4, n_ctx_per_slot=262144, tools_offered=False)
    assert check_props(props(supports_tool_calls=False), no_tools) == ()
    assert len(check_props(props(total_slots=1, n_ctx=1, supports_tool_calls=False),
                           EXPECTED)) == 3


async def start(nursery: trio.Nursery, tmp_path: Path, script: dict[str, Any]) -> LlamaClient:
    fake = FakeLlamaServer(script)
    endpoint = await nursery.start(partial(fake.serve, unix_socket=tmp_path / "l.sock"))
    return LlamaClient(endpoint)


async def test_passes_after_loading(nursery: trio.Nursery, tmp_path: Path,
                                    autojump_clock: Any) -> None:
    client = await start(nursery, tmp_path, {"health": {"loading": 2}})
    with trio.fail_after(100):
        report = await self_test(client, EXPECTED, load_timeout_s=600)
    assert report.loading_answers == 2
    assert report.props.total_slots == 4
    assert "health: ok (after 2 'Loading model' answers)" in report.lines()


async def test_mismatch(nursery: trio.Nursery, tmp_path: Path) -> None:
    client = await start(nursery, tmp_path, {"props": {"total_slots": 2, "n_ctx": 4096,
                                                       "supports_tool_calls": False}})
    with trio.fail_after(30), pytest.raises(InferenceMismatch) as info:
        await self_test(client, EXPECTED, load_timeout_s=600)
    assert len(info.value.mismatches) == 3
    assert info.value.message.endswith("found false")  # the pointer is added where shown
    assert pointer_of(info.value) == "docs/runbook.md#inference-mismatch"


async def test_still_loading(nursery: trio.Nursery, tmp_path: Path, autojump_clock: Any) -> None:
    client = await start(nursery, tmp_path, {"health": {"loading": -1}})
    with trio.fail_after(1000), pytest.raises(InferenceTimeout) as info:
        await self_test(client, EXPECTED, load_timeout_s=120)
    assert info.value.message.endswith("after 120 s")  # the pointer is added where shown
    assert pointer_of(info.value) == "docs/runbook.md#inference-unavailable"


async def test_unreachable(tmp_path: Path) -> None:
    client = LlamaClient(Endpoint.unix(tmp_path / "none.sock"))
    with trio.fail_after(30), pytest.raises(InferenceUnavailable):
        await self_test(client, EXPECTED, load_timeout_s=10)
