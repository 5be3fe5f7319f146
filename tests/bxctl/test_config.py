"""bxctl.toml (boxmaker/bxctl/_config.py), from real files and the environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker._errors import ConfigError
from boxmaker.bxctl._config import load_config


def test_no_file_means_every_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    config = load_config(None)
    assert config.source is None
    assert config.home == tmp_path / "home"
    assert config.admin_socket == tmp_path / "xdg" / "boxmaker" / "admin.sock"
    assert config.loop_socket == tmp_path / "xdg" / "boxmaker" / "loop.sock"
    assert (config.grants, config.audit, config.state) == (
        tmp_path / "home" / "grants", tmp_path / "home" / "audit", tmp_path / "home" / "state")
    assert config.brokerd_uid == config.loopd_uid == os.getuid()


def test_the_default_file_in_the_home_is_read(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path))
    (tmp_path / "bxctl.toml").write_text("brokerd_uid = 4242\n")
    config = load_config(None)
    assert config.source == tmp_path / "bxctl.toml" and config.brokerd_uid == 4242


def test_every_key(tmp_path: Path) -> None:
    path = tmp_path / "bxctl.toml"
    path.write_text(f'''home = "{tmp_path}/h"
admin_socket = "/run/bx/admin.sock"
loop_socket = "run/loop.sock"
grants = "/etc/bx/grants"
audit = "logs"
state = "st"
brokerd_uid = 1001
loopd_uid = 1002
''')
    config = load_config(path)
    assert config.admin_socket == Path("/run/bx/admin.sock")
    assert config.loop_socket == tmp_path / "h" / "run" / "loop.sock"
    assert config.grants == Path("/etc/bx/grants")
    assert config.audit == tmp_path / "h" / "logs" and config.state == tmp_path / "h" / "st"
    assert (config.brokerd_uid, config.loopd_uid) == (1001, 1002)


@pytest.mark.parametrize("text", ['unknown = 1\n', 'brokerd_uid = "me"\n', 'home = [\n',
                                  'grants = 3\n'])
def test_invalid_files_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bxctl.toml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        load_config(path)


def test_an_explicit_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_config(tmp_path / "absent.toml")
