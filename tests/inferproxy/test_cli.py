"""`inferproxy` command line: help, and start failures as exit 1 with the runbook pointer."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from boxmaker.inferproxy._cli import cli

POINTER = "docs/runbook.md#inferproxy-start-failed"


def test_help_lists_serve() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "serve" in result.output


def test_a_bad_config_exits_1_with_the_pointer(tmp_path: Path) -> None:
    config = tmp_path / "inferproxy.toml"
    config.write_text('upstream = "ftp://\x1b[2Jx:1"\n')
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip().endswith(POINTER)
    assert "\x1b" not in result.stderr


def test_a_missing_key_file_exits_1_with_the_pointer(tmp_path: Path) -> None:
    config = tmp_path / "inferproxy.toml"
    config.write_text(f'home = "{tmp_path}"\nupstream = "http://127.0.0.1:9"\n'
                      'api_key_file = "missing.key"\n')
    result = CliRunner().invoke(cli, ["serve", "--config", str(config)])
    assert result.exit_code == 1
    assert "api_key_file" in result.stderr
    assert result.stderr.strip().endswith(POINTER)
    assert not (tmp_path / "run").exists(), "nothing was bound"
