"""boxmaker/bxctl/_cli.py: the root group assembles every subcommand and builds the App."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from boxmaker import __version__
from boxmaker.bxctl._cli import cli


def test_every_subcommand_is_assembled() -> None:
    assert isinstance(cli, click.Group)
    assert set(cli.commands) == {"audit", "grants", "chat", "passkey", "approvals", "approve",
                                 "refuse", "status", "session"}
    grants = cli.commands["grants"]
    assert isinstance(grants, click.Group)
    assert {"replay", "suggest"} <= set(grants.commands)


def test_the_version_and_the_help() -> None:
    version = CliRunner().invoke(cli, ["--version"])
    assert (version.exit_code, version.stdout) == (0, f"bxctl, version {__version__}\n")
    help_text = CliRunner().invoke(cli, ["--help"])
    assert help_text.exit_code == 0
    for option in ("--config", "--admin-socket", "--loop-socket"):
        assert option in help_text.stdout


def test_the_admin_socket_option_reaches_the_subcommand(tmp_path: Path) -> None:
    (tmp_path / "bxctl.toml").write_text(f'home = "{tmp_path}"\n')
    socket = tmp_path / "nobody-here.sock"
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "bxctl.toml"),
                                      "--admin-socket", str(socket), "status"])
    assert result.exit_code == 3, result.output
    assert f"cannot reach brokerd at '{socket}'" in result.stderr
    assert "nothing was sent" in result.stderr


def test_a_bad_config_file_is_a_usage_error_of_the_subcommand(tmp_path: Path) -> None:
    path = tmp_path / "bxctl.toml"
    path.write_text("brokerd_uid = 'me'\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "status"])
    assert result.exit_code == 2 and "Error:" in result.stderr


def test_an_unknown_subcommand_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["launch"])
    assert result.exit_code == 2 and "No such command 'launch'" in result.stderr
