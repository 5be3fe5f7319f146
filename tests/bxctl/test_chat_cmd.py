"""`bxctl chat` argument handling and an unreachable loopd (CliRunner; no daemon)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from boxmaker.bxctl._cli import cli


def run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    config = tmp_path / "bxctl.toml"
    config.write_text(f'home = "{tmp_path}"\nloop_socket = "{tmp_path / "nothing.sock"}"\n'
                      f'admin_socket = "{tmp_path / "admin.sock"}"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "chat", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--json"], "--json needs --say"),
    (["--conversation", "Bad Name", "--say", "hi"], "--conversation must match"),
    (["--say", "   "], "--say needs some text"),
    (["--say", "\udcff"], "--say is not valid UTF-8"),
])
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    code, out, err = run(tmp_path, *args)
    assert code == 2 and out == "" and message in err


def test_unreachable_loopd_exits_3_and_says_nothing_was_sent(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, "--say", "hello")
    assert code == 3 and out == ""
    assert "cannot reach loopd" in err and "nothing was sent" in err
    assert err.rstrip().endswith("docs/runbook.md#daemon-unreachable")
