"""/proc/self/mountinfo (boxmaker/brokerd/runner/_mountinfo.py): parsing with its
escapes, and where a path sits in its file system as the top mount says."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.brokerd.runner._mountinfo import (
    MountEntry,
    fs_below,
    fs_location,
    parse_mountinfo,
    read_mountinfo,
)

components = st.lists(st.text("abc \t\\\n", min_size=1, max_size=4), min_size=0, max_size=3)


def _escape(path: str) -> str:
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)


@given(root=components, point=components, major=st.integers(0, 4095),
       minor=st.integers(0, 2**20))
def test_escaped_fields_parse_back(root: list[str], point: list[str], major: int,
                                   minor: int) -> None:
    root_path = "/" + "/".join(root)
    point_path = "/" + "/".join(point)
    line = (f"36 35 {major}:{minor} {_escape(root_path)} {_escape(point_path)} rw,noatime "
            "master:1 - ext3 /dev/root rw,errors=continue")
    assert parse_mountinfo(line + "\n") == [
        MountEntry(device=(major, minor), root=root_path, mount_point=point_path)]


def test_lines_that_are_not_entries_are_skipped() -> None:
    text = "garbage\n1 2 x:y / / rw\n1 2 8:1\n1 2 8:1 / /mnt rw - ext4 /dev/x rw\n"
    assert parse_mountinfo(text) == [MountEntry(device=(8, 1), root="/", mount_point="/mnt")]


ENTRIES = [
    MountEntry(device=(8, 1), root="/", mount_point="/"),
    MountEntry(device=(8, 2), root="/", mount_point="/srv"),
    MountEntry(device=(8, 1), root="/home/me", mount_point="/srv/alias"),  # a bind mount
    MountEntry(device=(8, 3), root="/", mount_point="/srv/alias"),  # mounted over it
]


def test_the_top_mount_decides() -> None:
    dev1, dev2, dev3 = os.makedev(8, 1), os.makedev(8, 2), os.makedev(8, 3)
    assert fs_location(ENTRIES, "/etc/x", dev1) == ((8, 1), "/etc/x")
    assert fs_location(ENTRIES, "/srv/data", dev2) == ((8, 2), "/data")
    assert fs_location(ENTRIES, "/srv", dev2) == ((8, 2), "/")
    # The later mount at the same point is on top.
    assert fs_location(ENTRIES, "/srv/alias/x", dev3) == ((8, 3), "/x")
    assert fs_location(ENTRIES[:3], "/srv/alias/x", dev1) == ((8, 1), "/home/me/x")
    # A device that is not the mount's cannot be related.
    assert fs_location(ENTRIES, "/srv/data", dev1) is None
    # A path that only starts like a mount point is not under it.
    assert fs_location(ENTRIES, "/srvx", dev1) == ((8, 1), "/srvx")


@given(base=st.lists(st.sampled_from("ab"), max_size=3), extra=st.lists(st.sampled_from("ab"),
                                                                         max_size=3))
def test_fs_below(base: list[str], extra: list[str]) -> None:
    outer = "/" + "/".join(base)
    inner = outer.rstrip("/") + ("/" + "/".join(extra) if extra else "")
    inner = inner or "/"
    rel = fs_below(inner, outer)
    assert rel is not None
    assert (outer.rstrip("/") + rel or "/") == inner
    assert fs_below(outer + "x", outer) is None or outer == "/"


def test_this_hosts_root_is_found() -> None:
    entries = read_mountinfo()
    assert entries
    st = os.stat("/")
    location = fs_location(entries, "/", st.st_dev)
    if location is not None:
        assert location[0] == (os.major(st.st_dev), os.minor(st.st_dev))
