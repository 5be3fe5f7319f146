"""boxmaker/loopd/_cli.py: the `loopd` group assembles its subcommands."""

from __future__ import annotations

from click.testing import CliRunner

from boxmaker import __version__
from boxmaker.loopd._cli import cli


def test_the_group_has_serve_and_self_test() -> None:
    assert set(cli.commands) == {"serve", "self-test"}
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "serve" in result.stdout and "self-test" in result.stdout
    assert "loopd: the agent loop" in result.stdout


def test_the_version_is_the_packages() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"loopd, version {__version__}\n"


def test_an_unknown_subcommand_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["start"])
    assert result.exit_code == 2 and "No such command 'start'" in result.stderr
