"""boxmaker/loopd/_command.py: ``--config`` and the fail-closed exit every subcommand shares."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from boxmaker._errors import UnavailableError
from boxmaker.loopd._command import Failed, config_option, load_or_fail


@click.command()
@config_option
def show_config(config_path: Path | None) -> None:
    """A subcommand as loopd's are built: the resolved config, or the fail-closed exit."""
    config = load_or_fail(config_path)
    click.echo(f"slots {config.inference.slots}")


def test_a_good_config_is_resolved(tmp_path: Path) -> None:
    path = tmp_path / "loopd.toml"
    path.write_text(f'home = "{tmp_path}"\n[inference]\nslots = 3\n')
    config = load_or_fail(path)
    assert config.inference.slots == 3
    result = CliRunner().invoke(show_config, ["--config", str(path)])
    assert (result.exit_code, result.stdout, result.stderr) == (0, "slots 3\n", "")


def test_a_bad_config_is_one_stderr_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "loopd.toml"
    path.write_text("[inference]\nslots = 0\n")
    result = CliRunner().invoke(show_config, ["--config", str(path)])
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("loopd: bad configuration: ") and "slots" in line
    assert line.endswith(" docs/runbook.md#loopd-start-failed")


def test_a_missing_named_config_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(Failed) as caught:
        load_or_fail(tmp_path / "absent.toml")
    assert caught.value.exit_code == 1
    assert isinstance(caught.value, UnavailableError)
    assert caught.value.format_message().endswith("docs/runbook.md#loopd-start-failed")


def test_the_config_error_is_escaped_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "loopd.toml"
    path.write_text('home = "\x1b[2J\nx"\n')
    result = CliRunner().invoke(show_config, ["--config", str(path)])
    assert result.exit_code == 1
    assert "\x1b" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_option_is_documented_with_its_default() -> None:
    result = CliRunner().invoke(show_config, ["--help"])
    assert result.exit_code == 0
    assert "--config PATH" in result.stdout and "$BOXMAKER_HOME/loopd.toml" in result.stdout
