"""boxmaker/loopd/_serve_cmd.py: `loopd serve` fails closed with one escaped stderr line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from boxmaker.loopd._cli import cli


def test_a_bad_config_does_not_start(tmp_path: Path) -> None:
    config = tmp_path / "loopd.toml"
    config.write_text("[inference]\nslots = 0\n")
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 1
    assert "loopd: bad configuration:" in result.stderr
    assert result.stderr.rstrip().endswith("docs/runbook.md#loopd-start-failed")


def test_an_unreachable_inference_server_fails_the_start(tmp_path: Path) -> None:
    config = tmp_path / "loopd.toml"
    config.write_text(f'home = "{tmp_path}"\n[inference]\nsocket = "run/none.sock"\n'
                      "load_timeout_s = 1\n")
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 1, result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith("loopd: the self-test failed:") and "cannot connect" in last
    assert last.endswith("docs/runbook.md#inference-unavailable")
    assert (tmp_path / "run" / "loop.sock").is_socket()  # bound before the self-test


def test_a_socket_that_cannot_be_bound_fails_the_start(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("a file where the socket directory should be")
    config = tmp_path / "loopd.toml"
    config.write_text(f'home = "{tmp_path}"\n')
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 1, result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith("loopd: ") and last.endswith("docs/runbook.md#loopd-start-failed")
