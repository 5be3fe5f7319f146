"""The host walk (boxmaker/brokerd/runner/_host_walk.py) on real directories:
what the kernel opens decides, not how the path is spelled."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from boxmaker._protected import Candidate, resolve_roots
from boxmaker.brokerd.runner._host_walk import (
    SYMLINK_MESSAGE,
    HostWalker,
    UnsafeTarget,
    Walked,
    sticky_shared,
)


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Path]:
    # A private directory: tmp_path's parents are the test runner's, not a shared one.
    root = tmp_path / "box"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    (root / "home").mkdir(mode=0o700)
    (root / "data").mkdir(mode=0o755)
    os.chmod(root / "data", 0o755)
    yield root


def walker(box: Path) -> HostWalker:
    return HostWalker(os.geteuid(), resolve_roots([Candidate(path=str(box / "home"),
                                                             required=True, own=True)]))


def walk(w: HostWalker, path: Path | str, *, follow: bool = True) -> Walked:
    return w.walk(str(path), follow=follow)


def test_an_existing_path_is_opened_and_read_back(box: Path) -> None:
    (box / "data" / "f").write_bytes(b"x")
    done = walk(walker(box), box / "data" / "f")
    try:
        assert done.real == str(box / "data" / "f") and done.rest == []
        assert (done.st.st_dev, done.st.st_ino) == ((box / "data" / "f").stat().st_dev,
                                                   (box / "data" / "f").stat().st_ino)
        assert os.readlink(f"/proc/self/fd/{done.fd}") == done.real
    finally:
        done.close()


def test_the_walk_ends_at_the_first_missing_component(box: Path) -> None:
    done = walk(walker(box), box / "data" / "new" / "deeper")
    try:
        assert done.real == str(box / "data") and done.rest == ["new", "deeper"]
    finally:
        done.close()
    with pytest.raises(UnsafeTarget, match=r"'\.\.' below a missing directory"):
        walk(walker(box), f"{box}/data/new/../../home/x")


def test_links_are_followed_when_told_and_refused_otherwise(box: Path) -> None:
    (box / "data" / "real").mkdir()
    (box / "data" / "real" / "f").write_bytes(b"x")
    (box / "data" / "link").symlink_to("real")
    followed = walk(walker(box), box / "data" / "link" / "f", follow=True)
    try:
        assert followed.real == str(box / "data" / "real" / "f")
    finally:
        followed.close()
    with pytest.raises(UnsafeTarget, match=SYMLINK_MESSAGE):
        walk(walker(box), box / "data" / "link" / "f", follow=False)


def test_the_protected_home_is_refused_however_it_is_spelled(box: Path) -> None:
    (box / "home" / "secret").write_bytes(b"k")
    (box / "data" / "to-home").symlink_to(box / "home")
    spellings = [box / "home" / "secret", f"{box}/data/../home/secret",
                 box / "data" / "to-home" / "secret", box / "home"]
    for spelled in spellings:
        with pytest.raises(UnsafeTarget, match="protected"):
            walk(walker(box), spelled)


def test_a_component_of_another_uid_is_refused(box: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    (box / "data" / "theirs").mkdir()
    os.chown(box / "data" / "theirs", 12345, 12345)
    with pytest.raises(UnsafeTarget, match="owned by uid 12345"):
        walk(walker(box), box / "data" / "theirs" / "f")


def test_a_directory_others_may_write_is_refused(box: Path) -> None:
    (box / "data" / "open").mkdir()
    os.chmod(box / "data" / "open", 0o777)
    with pytest.raises(UnsafeTarget, match="writable by others"):
        walk(walker(box), box / "data" / "open" / "f")
    os.chmod(box / "data" / "open", 0o1777)  # sticky, but this test's uid owns it
    if os.geteuid() == 0:
        # root-owned sticky and shared (like /tmp): allowed to pass through
        assert sticky_shared(os.stat(box / "data" / "open"))
        done = walk(walker(box), box / "data" / "open" / "f")
        done.close()
    else:
        assert not sticky_shared(os.stat(box / "data" / "open"))


def test_too_many_links(box: Path) -> None:
    (box / "data" / "a").symlink_to("b")
    (box / "data" / "b").symlink_to("a")
    with pytest.raises(UnsafeTarget, match="too many symbolic links"):
        walk(walker(box), box / "data" / "a" / "f")


def test_a_walk_from_a_start_descriptor(box: Path) -> None:
    (box / "data" / "sub").mkdir()
    (box / "data" / "sub" / "f").write_bytes(b"")
    start = walk(walker(box), box / "data")
    try:
        w = walker(box)
        done = w.walk("sub/f", start, follow=False, spelled=str(box / "data" / "sub" / "f"))
        try:
            assert done.real == str(box / "data" / "sub" / "f")
        finally:
            done.close()
        assert os.readlink(f"/proc/self/fd/{start.fd}") == str(box / "data")  # still open
    finally:
        start.close()


def test_check_roots_finds_a_replaced_or_missing_root(box: Path) -> None:
    w = walker(box)
    w.check_roots()
    os.rename(box / "home", box / "home-moved")
    (box / "home").mkdir(mode=0o700)
    with pytest.raises(UnsafeTarget, match="missing or was replaced"):
        w.check_roots()
    missing = HostWalker(os.geteuid(), resolve_roots([Candidate(
        path=str(box / "absent"), required=True, own=True)]))
    with pytest.raises(UnsafeTarget, match="a protected root is missing"):
        missing.check_roots()


def test_sticky_shared() -> None:
    st = os.stat("/tmp")
    assert sticky_shared(st) == (st.st_uid == 0 and bool(st.st_mode & stat.S_ISVTX)
                                 and bool(st.st_mode & 0o022))
