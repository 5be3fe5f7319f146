"""`bxctl grants explain` and brokerd compute ONE protected set (issues 10, 12).

Both load brokerd.toml with `boxmaker._brokerd_config.load_config` and compute
the set with its `compute_protected`: the paths must be the same, in the same
order, and explain must refuse the code that runs and podman's files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from boxmaker import _brokerd_config
from boxmaker._brokerd_config import compute_protected, load_config
from boxmaker.brokerd import _startup as brokerd_startup
from boxmaker.bxctl import _grants_cmd
from boxmaker.bxctl._cli import cli
from boxmaker.bxctl._grants_cmd import brokerd_protected_paths
from boxmaker.bxctl._replay_cmd import protected_paths
from boxmaker.policy._decision import ProtectedPaths


def everything(*paths: Path | str) -> str:
    """A read grant on the top directory of each path (a grant may not be /)."""
    tops = sorted({"/" + Path(p).parts[1] for p in paths} | {"/etc"})
    listed = ", ".join(f'"{t}"' for t in tops)
    return f'[[grant]]\nid = "everything"\ntool = "read_file"\nmode = "allow"\npaths = [{listed}]\n'


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "real-home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "all.toml").write_text(everything(tmp_path, sys.prefix, Path.home()))
    (tmp_path / "alias").symlink_to(home)
    path = tmp_path / "alias" / "brokerd.toml"
    path.write_text(
        f'home = "{tmp_path / "alias"}"\n[policy]\nprotected = ["extra"]\n'
        '[runner]\nkind = "podman"\npodman = "podman"\n'
    )
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "alias"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return path


def test_brokerd_and_explain_compute_the_same_protected_set(config: Path) -> None:
    brokerd = compute_protected(load_config(config)).spellings
    bxctl = brokerd_protected_paths(config)
    assert len(bxctl) == len(brokerd) > 10
    for ours, theirs in zip(bxctl, brokerd, strict=True):
        assert ours == theirs
    assert protected_paths(config) == ProtectedPaths.of(brokerd)
    real_home = str(config.parent.resolve())
    assert real_home in brokerd and str(config.parent) in brokerd
    for needed in (os.path.abspath(sys.prefix), "/etc/containers", "/usr/share/containers"):
        assert needed in brokerd


@pytest.mark.parametrize(
    "path",
    [
        "{real}/brokerd.toml",  # the home's real path, not the configured spelling
        "{real}/extra/x",
        "{prefix}/bin/python",
        "/etc/containers/policy.json",
        "{user}/.config/containers/storage.conf",
        "{user}/.local/share/containers/storage/overlay/x",
    ],
)
def test_explain_refuses_the_home_the_code_and_podmans_files(config: Path, path: str) -> None:
    text = path.format(
        real=config.parent.resolve(), prefix=os.path.abspath(sys.prefix), user=Path.home()
    )
    result = CliRunner().invoke(
        cli,
        ["grants", "explain", "--brokerd-config", str(config), "--tool", "read_file",
         "--args", f'{{"path": "{text}"}}', "--json"],
    )
    assert result.exit_code == 1, result.output
    assert '"code": "protected"' in result.output.replace('":"', '": "'), result.output


def test_bxctl_and_brokerd_share_one_loader_and_one_function() -> None:
    """No second reader of brokerd.toml: both take the very same functions."""
    assert brokerd_startup.compute_protected is _brokerd_config.compute_protected
    assert _grants_cmd.compute_protected is _brokerd_config.compute_protected
    assert _grants_cmd.load_config is _brokerd_config.load_config


def test_explain_refuses_what_brokerds_loader_refuses(config: Path) -> None:
    """An unknown key brokerd would refuse: explain refuses it too (exit 2)."""
    config.write_text(config.read_text() + "[policy.extra]\n")
    result = CliRunner().invoke(
        cli,
        ["grants", "explain", "--brokerd-config", str(config), "--tool", "echo",
         "--args", '{"text": "x"}'],
    )
    assert result.exit_code == 2, result.output
    assert "brokerd config:" in result.output
