"""boxmaker/_grant_mounts.py: a run_command approval's mounts, from the grant files."""

from __future__ import annotations

from pathlib import Path

from boxmaker._grant_mounts import command_mounts

GIT = ('[[grant]]\nid = "git-ask"\ntool = "run_command"\nmode = "ask"\n'
       'paths = ["/home/me/src", "/home/me/notes"]\ncommands = [["git", "log"]]\n'
       'rest = "any"\n{write}')


def _grants(tmp_path: Path, text: str) -> Path:
    where = tmp_path / "grants"
    where.mkdir(parents=True, exist_ok=True)
    (where / "git.toml").write_text(text)
    return where


def test_each_path_of_the_grant_is_a_mount_read_only_unless_write(tmp_path: Path) -> None:
    where = _grants(tmp_path, GIT.format(write=""))
    assert command_mounts(where, "git-ask") == [("/home/me/src", False),
                                                ("/home/me/notes", False)]
    other = _grants(tmp_path / "w", GIT.format(write="write = true\n"))
    assert command_mounts(other, "git-ask") == [("/home/me/src", True),
                                                ("/home/me/notes", True)]


def test_no_mounts_when_they_cannot_be_known(tmp_path: Path) -> None:
    assert command_mounts(tmp_path / "missing", "git-ask") is None
    where = _grants(tmp_path, GIT.format(write=""))
    assert command_mounts(where, "no-such-grant") is None
    (where / "echo.toml").write_text('[[grant]]\nid = "echo-all"\ntool = "echo"\nmode = "allow"\n')
    assert command_mounts(where, "echo-all") is None  # not a run_command grant
    (where / "bad.toml").write_text("[[grant]\n")
    assert command_mounts(where, "git-ask") is None  # an invalid set: nothing is trusted


def test_an_edited_grant_file_is_read_again(tmp_path: Path) -> None:
    where = _grants(tmp_path, GIT.format(write=""))
    assert command_mounts(where, "git-ask") == [("/home/me/src", False),
                                                ("/home/me/notes", False)]
    (where / "git.toml").write_text(GIT.format(write="").replace(', "/home/me/notes"', ""))
    assert command_mounts(where, "git-ask") == [("/home/me/src", False)]
