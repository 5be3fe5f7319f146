"""File-system locations from mountinfo, and the runner's private scratch (issue 10)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from boxmaker.brokerd.runner._mountinfo import (
    fs_below,
    fs_location,
    parse_mountinfo,
    read_mountinfo,
)
from boxmaker.brokerd.runner._scratch import Scratch

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda1 rw
40 27 254:0 /srv/data /mnt/data\\040dir rw,relatime - ext4 /dev/vda1 rw
41 27 254:0 /home/me /var/alias rw - ext4 /dev/vda1 rw
bad line
"""


def test_mountinfo_lines_are_parsed_with_their_escapes() -> None:
    entries = parse_mountinfo(MOUNTINFO)
    assert [(e.device, e.root, e.mount_point) for e in entries] == [
        ((0, 21), "/", "/proc"),
        ((254, 0), "/", "/"),
        ((254, 0), "/srv/data", "/mnt/data dir"),
        ((254, 0), "/home/me", "/var/alias"),
    ]


def test_a_bind_mount_names_the_place_in_the_file_system() -> None:
    entries = parse_mountinfo(MOUNTINFO)
    dev = os.makedev(254, 0)
    assert fs_location(entries, "/var/alias/notes", dev) == ((254, 0), "/home/me/notes")
    assert fs_location(entries, "/home/me/notes", dev) == ((254, 0), "/home/me/notes")
    assert fs_location(entries, "/mnt/data dir", dev) == ((254, 0), "/srv/data")
    assert fs_location(entries, "/proc/1", dev) is None  # /proc is another device
    assert fs_below("/home/me/notes", "/home/me") == "/notes"
    assert fs_below("/home/me", "/home/me") == ""
    assert fs_below("/home/me2", "/home/me") is None
    assert fs_below("/x", "/") == "/x"


def test_this_hosts_mountinfo_locates_a_real_bind_mount(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    (tmp_path / "src" / "inner").mkdir(parents=True)
    (tmp_path / "mnt").mkdir()
    subprocess.run(["mount", "--bind", str(tmp_path / "src"), str(tmp_path / "mnt")], check=True)
    try:
        entries = read_mountinfo()
        st = (tmp_path / "mnt" / "inner").stat()
        via_mount = fs_location(entries, str(tmp_path / "mnt" / "inner"), st.st_dev)
        direct = fs_location(entries, str(tmp_path / "src" / "inner"), st.st_dev)
        assert via_mount is not None and via_mount == direct
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "mnt")], check=False)


def test_the_scratch_directory_is_private_fresh_and_removed(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path / "run" / "runner-x", uid=os.geteuid())
    (tmp_path / "run" / "runner-x" / "egress-old").mkdir(parents=True)
    scratch.reset()
    root = tmp_path / "run" / "runner-x"
    assert list(root.iterdir()) == [] and root.stat().st_mode & 0o777 == 0o700
    one, two = scratch.call_dir("egress-"), scratch.call_dir("egress-")
    assert one != two and one.parent == root and one.stat().st_mode & 0o777 == 0o700
    directory, file = scratch.mask_sources()
    assert directory.is_dir() and file.read_bytes() == b""
    assert directory.stat().st_mode & 0o777 == 0o500 and file.stat().st_mode & 0o777 == 0o400
    scratch.remove()
    assert not root.exists()


def test_a_scratch_directory_of_another_uid_is_reported_and_left_alone(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    root = tmp_path / "runner-x"
    root.mkdir(mode=0o777)
    root.chmod(0o777)
    os.chown(root, 12345, 12345)
    scratch = Scratch(root, uid=0)
    with pytest.raises(OSError) as caught:
        scratch.reset()
    assert str(caught.value) == (
        "the runner's scratch directory is not private to brokerd (uid 0, mode 0700): "
        f"{root} is a directory owned by uid 12345 with mode 0777"
    )
    assert root.exists()
