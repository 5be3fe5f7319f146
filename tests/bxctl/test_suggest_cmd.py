"""`bxctl grants suggest` (boxmaker/bxctl/_suggest_cmd.py) on a real home: the
draft never goes into a grants directory, however --out is spelled, and a log
that does not verify suggests nothing.  (The drafts themselves are tested
against a real brokerd's log in test_grants_history_cmd.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from boxmaker.bxctl._cli import cli
from boxmaker.bxctl._suggest_cmd import _inside
from tests.fakes.audit_log import valid_log


def test_inside_follows_links(tmp_path: Path) -> None:
    grants = tmp_path / "grants"
    grants.mkdir()
    (tmp_path / "alias").symlink_to(grants)
    assert _inside(grants / "new.toml", grants)
    assert _inside(grants, grants)
    assert _inside(tmp_path / "alias" / "new.toml", grants)
    assert _inside(tmp_path / "x" / ".." / "grants" / "n.toml", grants)
    assert not _inside(tmp_path / "grants-other" / "n.toml", grants)
    assert not _inside(tmp_path / "n.toml", grants)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "g.toml").write_text("")
    valid_log(5, files=1).write(home / "audit")
    (home / "brokerd.toml").write_text(f'home = "{home}"\n')
    return home


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"BOXMAKER_HOME": str(home),
                                                     "XDG_RUNTIME_DIR": ""})


def test_out_into_the_grants_directory_through_a_link_is_refused(home: Path,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "innocent").symlink_to(home / "grants")
    result = run(home, "grants", "suggest", "--out", str(tmp_path / "innocent" / "new.toml"))
    assert result.exit_code == 2 and "--out is inside the grants directory" in result.output
    assert sorted(p.name for p in (home / "grants").iterdir()) == ["g.toml"]


def test_a_draft_to_a_file_elsewhere(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "draft.toml"
    result = run(home, "grants", "suggest", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("wrote ") and str(out) in result.output
    assert out.read_text().startswith("# bxctl grants suggest: a draft from ")


def test_a_log_that_does_not_verify_suggests_nothing(home: Path, tmp_path: Path) -> None:
    day = next((home / "audit").glob("*.jsonl"))
    day.write_bytes(day.read_bytes().replace(b'"seq":3', b'"seq":33', 1))
    out = tmp_path / "draft.toml"
    result = run(home, "grants", "suggest", "--out", str(out))
    assert result.exit_code == 1 and "nothing suggested" in result.output
    assert not out.exists()
