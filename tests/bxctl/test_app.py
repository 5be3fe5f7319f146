"""boxmaker/bxctl/_app.py: the App every subcommand receives, and the argument checks."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from boxmaker.bxctl._app import App, pass_app, text_arg


def write_config(tmp_path: Path, text: str = "") -> Path:
    path = tmp_path / "bxctl.toml"
    path.write_text(f'home = "{tmp_path}"\n{text}')
    return path


def test_the_config_is_read_from_the_named_file(tmp_path: Path) -> None:
    app = App(write_config(tmp_path, "brokerd_uid = 1234\n"), None, None)
    assert app.config.brokerd_uid == 1234
    assert app.config.admin_socket.is_relative_to(tmp_path)
    assert app.config.source == tmp_path / "bxctl.toml"


def test_the_socket_options_override_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'admin_socket = "/run/a.sock"\nloop_socket = "/run/l.sock"\n')
    assert App(path, None, None).config.admin_socket == Path("/run/a.sock")
    app = App(path, tmp_path / "other-admin.sock", tmp_path / "other-loop.sock")
    assert app.config.admin_socket == tmp_path / "other-admin.sock"
    assert app.config.loop_socket == tmp_path / "other-loop.sock"
    only_loop = App(path, None, tmp_path / "x.sock").config
    assert (only_loop.admin_socket, only_loop.loop_socket) == (Path("/run/a.sock"),
                                                               tmp_path / "x.sock")


def test_the_config_is_read_once(tmp_path: Path) -> None:
    path = write_config(tmp_path, "brokerd_uid = 1\n")
    app = App(path, None, None)
    first = app.config
    path.write_text("this is not toml [")
    assert app.config is first


def test_a_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bxctl.toml"
    path.write_text("unknown = 1\n")
    with pytest.raises(click.UsageError, match="unknown"):
        App(path, None, None).config  # noqa: B018
    with pytest.raises(click.UsageError):
        App(tmp_path / "absent.toml", None, None).config  # noqa: B018


def test_text_arguments_are_checked_for_utf8() -> None:
    assert text_arg("fine ✓", "--reason") == "fine ✓"
    with pytest.raises(click.UsageError, match="--reason is not valid UTF-8"):
        text_arg("bad\udcff", "--reason")


@click.command()
@click.argument("note")
@pass_app
def note_cmd(app: App, note: str) -> None:
    """A subcommand as bxctl's are built: the App from ctx.obj, a checked text argument."""
    click.echo(f"{text_arg(note, 'NOTE')} {app.config.brokerd_uid}")


def test_a_subcommand_gets_the_app_and_shows_usage_errors_as_exit_2(tmp_path: Path) -> None:
    app = App(write_config(tmp_path, "brokerd_uid = 77\n"), None, None)
    good = CliRunner().invoke(note_cmd, ["hello"], obj=app)
    assert (good.exit_code, good.stdout) == (0, "hello 77\n")
    bad = CliRunner().invoke(note_cmd, ["h\udcffi"], obj=app)
    assert bad.exit_code == 2 and "NOTE is not valid UTF-8" in bad.stderr
    broken = CliRunner().invoke(note_cmd, ["x"], obj=App(tmp_path / "absent.toml", None, None))
    assert broken.exit_code == 2 and "Error:" in broken.stderr
