"""The self-test: the steps against the fake in process, and `loopd self-test` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner

from boxmaker._error_table import pointer_of
from boxmaker._http import Endpoint, InferenceTimeout, InferenceUnavailable, Props
from boxmaker._http.client import LlamaClient
from boxmaker.loopd._cli import cli
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


# -- `loopd self-test` against the fake as a subprocess -------------------------------


@pytest.fixture
def fake_process(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def run(script: dict[str, Any]) -> str:
        path = tmp_path / f"script{len(procs)}.json"
        path.write_text(json.dumps(script))
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.llama_server", "--script", str(path)],
            cwd=REPO, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the fake prints this once it listens
        assert line.startswith("listening on http://"), line
        return line.split()[-1]

    yield run
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def write_config(tmp_path: Path, url: str, **inference: Any) -> Path:
    lines = [f'home = "{tmp_path}"', "[inference]", f'url = "{url}"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in inference.items()]
    path = tmp_path / "loopd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_self_test_passes(tmp_path: Path, fake_process: Any) -> None:
    url = fake_process({"health": {"loading": 1},
                        "props": {"total_slots": 2, "n_ctx": 8192}})
    config = write_config(tmp_path, url, slots=2, n_ctx_per_slot=8192)
    result = CliRunner().invoke(cli, ["self-test", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert f"inference server: {url}" in result.stdout
    assert "2 slots, n_ctx 8192 per slot, tool calls: yes" in result.stdout
    assert "health: ok (after 1 'Loading model' answers)" in result.stdout
    assert result.stdout.rstrip().endswith("self-test passed")
    assert result.stderr == ""


def test_cli_self_test_mismatch(tmp_path: Path, fake_process: Any) -> None:
    url = fake_process({"props": {"total_slots": 2, "n_ctx": 4096}})
    config = write_config(tmp_path, url, slots=4, n_ctx_per_slot=262144)
    result = CliRunner().invoke(cli, ["self-test", "--config", str(config)])
    assert result.exit_code == 1
    assert "expected 4" in result.stderr and "found total_slots 2" in result.stderr
    assert result.stderr.rstrip().endswith("docs/runbook.md#inference-mismatch")
    assert "self-test passed" not in result.stdout


def test_cli_self_test_unreachable(tmp_path: Path) -> None:
    config = tmp_path / "loopd.toml"
    config.write_text(f'home = "{tmp_path}"\n[inference]\nsocket = "run/none.sock"\n'
                      "load_timeout_s = 5\n")
    result = CliRunner().invoke(cli, ["self-test", "--config", str(config)])
    assert result.exit_code == 1
    assert "cannot connect" in result.stderr
    assert result.stderr.rstrip().endswith("docs/runbook.md#inference-unavailable")


def test_cli_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "loopd.toml"
    config.write_text("[inference]\nslots = 0\n")
    result = CliRunner().invoke(cli, ["self-test", "--config", str(config)])
    assert result.exit_code == 1
    assert "slots" in result.stderr
    assert result.stderr.rstrip().endswith("docs/runbook.md#loopd-start-failed")
