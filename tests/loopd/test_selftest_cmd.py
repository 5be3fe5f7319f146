"""`loopd self-test` (boxmaker/loopd/_selftest_cmd.py) end to end: the fake as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from boxmaker.loopd._cli import cli

REPO = Path(__file__).resolve().parents[2]


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
