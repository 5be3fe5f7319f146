"""Mount what was checked (issue 10): the toolkit compares brokerd's identities.

Real files; the "swap" is a real rename between what brokerd would have
checked and what the toolkit opens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from boxmaker.toolkit.__main__ import run


def ident(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"dev": st.st_dev, "ino": st.st_ino}


def call(tool: str, args: dict[str, Any], checked: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(
        {"args": args, "limits": {"output_max_bytes": 1 << 20}, "checked": checked}
    ).encode()
    answer = json.loads(run(tool, raw))
    assert isinstance(answer, dict)
    return answer


def checked_for(root: Path, target: Path | None, created: bool = False) -> dict[str, Any]:
    return {
        "root": {"path": str(root), **ident(root)},
        "target": ident(target) if target is not None else None,
        "created": created,
    }


def test_the_checked_file_is_read(tmp_path: Path) -> None:
    f = tmp_path / "todo.txt"
    f.write_text("milk")
    got = call("read_file", {"path": str(f)}, checked_for(f, f))
    assert got["ok"]["content"] == "milk"


def test_a_swapped_file_is_a_mount_mismatch_and_nothing_is_read(tmp_path: Path) -> None:
    f = tmp_path / "todo.txt"
    f.write_text("milk")
    checked = checked_for(f, f)
    os.rename(f, tmp_path / "old")
    f.write_text("SECRET CONFIG")
    got = call("read_file", {"path": str(f)}, checked)
    assert got["error"]["code"] == "mount_mismatch"
    assert "SECRET" not in json.dumps(got)


def test_a_swapped_directory_is_a_mount_mismatch_for_list_and_write(tmp_path: Path) -> None:
    d = tmp_path / "notes"
    d.mkdir()
    checked = checked_for(d, d)
    os.rename(d, tmp_path / "notes.old")
    d.mkdir()
    (d / "grants").mkdir()
    assert call("list_dir", {"path": str(d)}, checked)["error"]["code"] == "mount_mismatch"
    write = checked_for(tmp_path / "notes.old", None)
    write["root"]["path"] = str(d)
    got = call("write_file", {"path": str(d / "pwn.toml"), "content": "x", "mode": "create"}, write)
    assert got["error"]["code"] == "mount_mismatch"
    assert not (d / "pwn.toml").exists()


def test_a_file_brokerd_created_is_written_as_create(tmp_path: Path) -> None:
    f = tmp_path / "log.txt"
    f.write_text("")
    got = call(
        "write_file", {"path": str(f), "content": "hello", "mode": "create"},
        checked_for(f, f, created=True),
    )
    assert got == {"ok": {"bytes_written": 5}}
    assert f.read_text() == "hello"
    # Without brokerd's word that it made the file, create refuses an existing one.
    got = call("write_file", {"path": str(f), "content": "x", "mode": "create"}, checked_for(f, f))
    assert got["error"]["code"] == "exists"


@pytest.mark.parametrize(
    "checked",
    [
        {},
        {"root": {"path": "/", "dev": 1, "ino": 1}, "target": None},
        {"root": {"path": "/", "dev": -1, "ino": 1}, "target": None, "created": False},
        {"root": {"path": "/", "dev": 1, "ino": 1}, "target": None, "created": 1},
        {"root": {"path": "/", "dev": 1, "ino": 1, "x": 1}, "target": None, "created": False},
        {"root": {"path": "/", "dev": 1, "ino": True}, "target": None, "created": False},
    ],
)
def test_a_bad_checked_member_is_refused(tmp_path: Path, checked: dict[str, Any]) -> None:
    got = call("read_file", {"path": str(tmp_path)}, checked)
    assert got["error"]["code"] == "bad_request"
