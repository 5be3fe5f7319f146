"""The starter home of `boxmaker up` (boxmaker/stack/_home.py), written into a
real directory and read back by the daemons' own loaders: every file valid,
private, never overwritten, brokerd.toml marked as up's own."""

from __future__ import annotations

import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

from boxmaker._brokerd_config import load_config
from boxmaker.bxctl._config import load_config as load_bxctl
from boxmaker.inferproxy._config import load_config as load_inferproxy
from boxmaker.loopd._config import load_config as load_loopd
from boxmaker.policy._decide import decide
from boxmaker.policy._decision import ProtectedPaths, ToolCall
from boxmaker.policy._explain import explain_document
from boxmaker.policy._load import load_grants
from boxmaker.policy._model import GrantSet
from boxmaker.proto._taint import Taint
from boxmaker.stack._home import brokerd_toml, write_starter_home
from boxmaker.stack._owned import OWNED_FILE, is_owned

IMAGE = "sha256:" + "ab" * 32
NAMES = ["brokerd.toml", "inferproxy.toml", "loopd.toml", "bxctl.toml", "core.md",
         "grants/examples.toml"]


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home, notes = tmp_path / "home", tmp_path / "user" / "demo" / "notes"
    starter = write_starter_home(home, upstream="http://127.0.0.1:8080", demo_notes=notes,
                                 tools_image=IMAGE, max_tokens=512, slots=2,
                                 n_ctx_per_slot=4096)
    repository = [notes.parent / ".git"] if shutil.which("git") else []
    assert sorted(starter.created) == sorted([home / n for n in NAMES] + [notes / "hello.md"]
                                             + repository)
    return home, notes


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_new_demo_directory_is_a_git_repository_with_one_commit(
        made: tuple[Path, Path]) -> None:
    _, notes = made
    demo = notes.parent
    status = subprocess.run(["git", "status", "--porcelain"], cwd=demo, capture_output=True,
                            text=True, check=False)
    assert (status.returncode, status.stdout) == (0, ""), status
    log = subprocess.run(["git", "log", "--format=%an|%s", "--", "notes/hello.md"], cwd=demo,
                         capture_output=True, text=True, check=True)
    assert log.stdout == "boxmaker up|boxmaker up: the demo notes\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_an_existing_demo_directory_is_not_made_a_repository(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    notes = tmp_path / "demo" / "notes"
    notes.parent.mkdir()  # the owner's own directory, even without hello.md in it
    starter = write_starter_home(tmp_path / "home", upstream="http://127.0.0.1:8080",
                                 demo_notes=notes)
    assert not (notes.parent / ".git").exists()
    assert notes.parent / ".git" not in starter.created


def test_every_file_is_private_and_loads(made: tuple[Path, Path]) -> None:
    home, notes = made
    for name in NAMES:
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(home.stat().st_mode) & 0o077 == 0
    loopd = load_loopd(home / "loopd.toml")
    assert loopd.inference.slots == 2 and loopd.inference.n_ctx_per_slot == 4096
    assert loopd.inference.max_tokens == 512
    assert load_inferproxy(home / "inferproxy.toml").upstream is not None
    bxctl = load_bxctl(home / "bxctl.toml")
    assert bxctl.admin_socket == home / "run" / "admin.sock"
    grants = load_grants(home / "grants")
    assert isinstance(grants, GrantSet), grants
    ids = {g.id for g in grants.grants}
    assert {"demo-notes-read", "no-ssh", "python-docs"} <= ids
    assert (notes / "hello.md").read_text().startswith("# Demo notes")
    assert (home / "logs").is_dir()


def test_brokerd_toml_runner_and_ownership(made: tuple[Path, Path]) -> None:
    home, _ = made
    data = (home / "brokerd.toml").read_bytes()
    table = tomllib.loads(data.decode())
    assert table["runner"] == {"kind": "podman", "image": IMAGE, "oci_runtime": "runc",
                               "nofile": 1024, "nproc": 512}
    assert table["sockets"]["broker"] == str(home / "run" / "broker.sock")
    assert (home / OWNED_FILE).exists() and is_owned(home, "brokerd.toml")
    refusing = tomllib.loads(brokerd_toml(home, None))
    assert refusing["runner"] == {"kind": "refusing"}


def test_nothing_is_overwritten(made: tuple[Path, Path]) -> None:
    home, notes = made
    (home / "loopd.toml").write_text("# the owner's own\n")
    (notes / "hello.md").write_text("mine")
    again = write_starter_home(home, upstream="http://elsewhere:1", demo_notes=notes)
    assert again.created == []
    assert (home / "loopd.toml").read_text() == "# the owner's own\n"
    assert (notes / "hello.md").read_text() == "mine"


def test_hostile_paths_stay_strings(tmp_path: Path) -> None:
    home = tmp_path / 'h"ome\nx = 1'
    write_starter_home(home, upstream="http://127.0.0.1:8080", demo_notes=tmp_path / "n")
    assert tomllib.loads((home / "bxctl.toml").read_text())["home"] == str(home)
    assert tomllib.loads((home / "brokerd.toml").read_text())["home"] == str(home)


def test_core_md_names_the_owners_home_and_the_notes(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home = tmp_path / "home"
    starter = write_starter_home(home, upstream="http://127.0.0.1:8080", temperature=0.0)
    core = (home / "core.md").read_text().splitlines()
    at = core.index(f"The owner's home directory, ~, is {tmp_path / 'user'}.")
    assert core[at + 1] == (f"The owner's notes are in the directory {starter.demo_notes} "
                            "(tools take absolute paths).")
    assert starter.demo_notes == tmp_path / "user" / "boxmaker-demo" / "notes"
    assert load_loopd(home / "loopd.toml").inference.temperature == 0.0


def test_max_tokens_left_commented_when_not_given(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_starter_home(home, upstream="http://127.0.0.1:8080", demo_notes=tmp_path / "n")
    table = tomllib.loads((home / "loopd.toml").read_text())
    assert "max_tokens" not in table["inference"]
    assert "temperature" not in table["inference"]  # loopd's own default
    assert "# max_tokens = 1024" in (home / "loopd.toml").read_text()


def test_the_commands_image_and_the_git_starter_grant(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home, notes = tmp_path / "home", tmp_path / "user" / "boxmaker-demo" / "notes"
    commands = "sha256:" + "cd" * 32
    write_starter_home(home, upstream="http://127.0.0.1:8080", demo_notes=notes,
                       tools_image=IMAGE, commands_image=commands)
    config = load_config(home / "brokerd.toml")  # brokerd's own loader accepts it
    assert config.commands is not None and config.commands.image == commands
    assert "run_command" in load_loopd(home / "loopd.toml").tools
    grants = load_grants(home / "grants", commands_path=config.commands.path)  # G21 too
    assert isinstance(grants, GrantSet), grants
    git = grants.get("demo-git-read")
    assert git is not None and git.paths == (str(notes.parent),) and git.mode == "allow"
    cwd = str(notes.parent)
    taint = Taint(label="public", untrusted=False)
    none = ProtectedPaths.of([])
    for argv, outcome in ((["git", "status"], "allowed"), (["git", "log", "-n", "3"], "allowed"),
                          (["git", "push"], "denied"), (["/usr/bin/git", "log"], "denied"),
                          (["git", "-c", "core.pager=sh", "log"], "denied")):
        result = decide(ToolCall(tool="run_command", args={"argv": argv, "cwd": cwd}), taint,
                        grants, none)
        assert explain_document(result)["outcome"] == outcome, argv
    # without the commands image: no [commands], run_command not offered, the grant loads
    bare = tomllib.loads(brokerd_toml(home, IMAGE))
    assert "commands" not in bare
    assert "commands" not in tomllib.loads(brokerd_toml(home, None, commands))
