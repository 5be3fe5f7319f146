"""The O_NOFOLLOW walk of the toolkit (boxmaker/toolkit/_walk.py), on real files:
a symbolic link anywhere in the path is refused, never followed; errors keep
stable codes; the checked identities catch a swapped path."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from boxmaker.toolkit._errors import SYMLINK_MESSAGE, ToolError
from boxmaker.toolkit._walk import (
    Checked,
    open_last,
    open_parent,
    open_path,
    os_error,
    split_path,
)


def test_split_path() -> None:
    assert split_path("/a/b c/\u00e9") == [b"a", b"b c", "\u00e9".encode()]
    for bad in ("/", "a/b", "/a//b", "/a/./b", "/a/../b", "/a/"):
        with pytest.raises(ToolError) as caught:
            split_path(bad)
        assert caught.value.code == "bad_request"


def test_opens_a_real_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"content")
    fd = open_path(str(tmp_path / "d" / "f"), os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"content"
    finally:
        os.close(fd)


def test_a_symlink_in_a_directory_component_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "f").write_bytes(b"secret")
    (tmp_path / "granted").mkdir()
    (tmp_path / "granted" / "link").symlink_to(secret)
    with pytest.raises(ToolError) as caught:
        open_path(str(tmp_path / "granted" / "link" / "f"), os.O_RDONLY)
    assert (caught.value.code, caught.value.message) == ("symlink", SYMLINK_MESSAGE)


def test_a_symlink_as_the_last_component_is_refused_for_read_and_write(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(target)
    for flags in (os.O_RDONLY, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_CREAT):
        with pytest.raises(ToolError) as caught:
            open_path(str(tmp_path / "link"), flags)
        assert caught.value.code == "symlink"
    assert target.read_bytes() == b"keep"


def test_a_dangling_symlink_is_refused_not_created_through(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "would-be-created")
    with pytest.raises(ToolError) as caught:
        open_path(str(tmp_path / "link"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    assert caught.value.code == "symlink"
    assert not (tmp_path / "would-be-created").exists()


def test_errors_keep_their_codes(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    cases = [
        (tmp_path / "missing" / "x", os.O_RDONLY, "not_found"),
        (tmp_path / "missing", os.O_RDONLY, "not_found"),
        (tmp_path / "file" / "x", os.O_RDONLY, "not_a_directory"),
        (tmp_path / "file", os.O_WRONLY | os.O_CREAT | os.O_EXCL, "exists"),
        (tmp_path, os.O_WRONLY, "is_a_directory"),
    ]
    for path, flags, code in cases:
        with pytest.raises(ToolError) as caught:
            open_path(str(path), flags)
        assert caught.value.code == code, path


def test_open_parent_returns_the_parent_and_the_name(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    parent, name = open_parent(str(tmp_path / "d" / "new"))
    try:
        assert name == b"new"
        assert os.fstat(parent).st_ino == (tmp_path / "d").stat().st_ino
        fd = open_last(parent, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"x")
        os.close(fd)
    finally:
        os.close(parent)
    assert (tmp_path / "d" / "new").read_bytes() == b"x"


@pytest.mark.parametrize(("number", "code"), [
    (errno.ENOENT, "not_found"), (errno.EACCES, "permission_denied"),
    (errno.EPERM, "permission_denied"), (errno.EROFS, "read_only"),
    (errno.ENOSPC, "no_space"), (errno.EDQUOT, "no_space"), (errno.EIO, "io_error"),
])
def test_os_error_codes(number: int, code: str) -> None:
    error = os_error(OSError(number, os.strerror(number)), "the path")
    assert error.code == code
    assert error.message == f"the path: {os.strerror(number)}"


def test_eloop_is_the_symlink_message() -> None:
    error = os_error(OSError(errno.ELOOP, "loop"), "x")
    assert (error.code, error.message) == ("symlink", SYMLINK_MESSAGE)
    assert str(error) == f"symlink: {SYMLINK_MESSAGE}"


def _ident(path: Path) -> dict[str, int]:
    st = path.lstat()
    return {"dev": st.st_dev, "ino": st.st_ino}


def test_checked_parse_is_strict() -> None:
    good = {"root": {"path": "/a", "dev": 1, "ino": 2}, "target": None, "created": False}
    checked = Checked.parse(good)
    assert (checked.root_path, checked.root_id, checked.target_id, checked.created) == (
        "/a", (1, 2), None, False)
    bad_values = [
        [], {**good, "extra": 1}, {**good, "root": {"path": "/a", "dev": 1}},
        {**good, "root": {"path": 1, "dev": 1, "ino": 2}},
        {**good, "root": {"path": "/a", "dev": -1, "ino": 2}},
        {**good, "root": {"path": "/a", "dev": True, "ino": 2}},
        {**good, "target": {"dev": 1}}, {**good, "target": []},
        {**good, "created": 0},
    ]
    for value in bad_values:
        with pytest.raises(ToolError) as caught:
            Checked.parse(value)
        assert caught.value.code == "bad_request", value


def test_checked_root_catches_a_swapped_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    checked = Checked(str(root), tuple(_ident(root).values()), None, False)  # type: ignore[arg-type]
    checked.verify_root()
    root.rename(tmp_path / "moved")
    root.mkdir()  # same path, another directory
    with pytest.raises(ToolError) as caught:
        checked.verify_root()
    assert caught.value.code == "mount_mismatch"
    root.rmdir()
    root.symlink_to(tmp_path / "moved")  # the old directory again, through a link
    with pytest.raises(ToolError) as caught:
        checked.verify_root()
    # O_PATH|O_NOFOLLOW opens the link itself: it is not the directory brokerd checked.
    assert caught.value.code == "mount_mismatch"


def test_checked_target_and_parent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "f").write_bytes(b"1")
    (root / "g").write_bytes(b"2")
    checked = Checked(str(root), tuple(_ident(root).values()),  # type: ignore[arg-type]
                      tuple(_ident(root / "f").values()), False)  # type: ignore[arg-type]
    with open(root / "f", "rb") as f:
        checked.verify_target(f.fileno())
    with open(root / "g", "rb") as g, pytest.raises(ToolError) as caught:
        checked.verify_target(g.fileno())
    assert caught.value.code == "mount_mismatch"
    new = Checked(str(root), tuple(_ident(root).values()), None, True)  # type: ignore[arg-type]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    other = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        new.verify_parent(fd, str(root / "new"))
        with pytest.raises(ToolError):
            new.verify_parent(other, str(root / "new"))
        new.verify_parent(other, str(root / "sub" / "new"))  # not directly below: not compared
    finally:
        os.close(fd)
        os.close(other)
