"""Default places (boxmaker/_paths.py): the environment decides, nothing is resolved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boxmaker._paths import UID_MAX, absolute, boxmaker_home, default_socket, under


def test_home_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "bx"))
    assert boxmaker_home() == tmp_path / "bx"


def test_home_default_under_the_users_home(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.delenv("BOXMAKER_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert boxmaker_home() == tmp_path / ".local" / "share" / "boxmaker"
    monkeypatch.setenv("BOXMAKER_HOME", "")  # empty counts as unset
    assert boxmaker_home() == tmp_path / ".local" / "share" / "boxmaker"


def test_home_with_bytes_that_are_not_utf8(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = b"/tmp/bx-\xff"
    monkeypatch.setitem(os.environb, b"BOXMAKER_HOME", raw)
    assert os.fsencode(boxmaker_home()) == raw


def test_absolute_does_not_resolve_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    assert absolute(Path("link/sock")) == tmp_path / "link" / "sock"
    assert absolute(Path("a/../b")) == tmp_path / "b"


def test_under_keeps_absolute_paths_and_roots_relative_ones(tmp_path: Path) -> None:
    assert under(tmp_path, "/etc/x") == Path("/etc/x")
    assert under(tmp_path, "audit") == tmp_path / "audit"
    assert under(tmp_path, Path("a/b")) == tmp_path / "a" / "b"


def test_default_socket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    assert default_socket(tmp_path, "broker.sock") == tmp_path / "xdg" / "boxmaker" / "broker.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert default_socket(tmp_path, "broker.sock") == tmp_path / "run" / "broker.sock"


def test_uid_max_is_below_the_no_uid_value() -> None:
    assert UID_MAX == 0xFFFF_FFFE
