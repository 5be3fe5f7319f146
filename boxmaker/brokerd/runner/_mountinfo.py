"""Where a path sits inside its file system, from /proc/self/mountinfo (issue 10).

A bind mount shows one directory of a file system at a second path.  Two
paths name the same place when they are on the same device and their
*file-system paths* (the mount's root inside the file system, plus the path
below the mount point) are equal; one lies inside the other when its
file-system path is below the other's.  The runner uses this to find brokerd's
home (or any protected root) inside a directory it is about to mount, however
that directory was reached: a bind mount of the home's parent elsewhere is
still the home's parent.

`parse_mountinfo` and `fs_location` are pure; `read_mountinfo` reads the file.
"""

from __future__ import annotations

import os
import re

import attrs

_ESCAPE = re.compile(r"\\([0-7]{3})")
MOUNTINFO = "/proc/self/mountinfo"
_MAX_BYTES = 16 * 1024 * 1024


@attrs.frozen(kw_only=True)
class MountEntry:
    device: tuple[int, int]
    root: str
    """The directory of the file system this mount shows."""
    mount_point: str


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """The entries of /proc/self/mountinfo, in order (later mounts over earlier)."""
    out: list[MountEntry] = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 5 or ":" not in fields[2]:
            continue
        major, _, minor = fields[2].partition(":")
        if not (major.isdigit() and minor.isdigit()):
            continue
        out.append(
            MountEntry(
                device=(int(major), int(minor)),
                root=_unescape(fields[3]),
                mount_point=_unescape(fields[4]),
            )
        )
    return out


def read_mountinfo() -> list[MountEntry]:
    with open(MOUNTINFO, "rb") as f:
        data = f.read(_MAX_BYTES)
    return parse_mountinfo(data.decode("utf-8", "surrogateescape"))


def _below(path: str, base: str) -> str | None:
    """`path` relative to `base` ("" when equal, "/x/y" below), or None."""
    if base == "/":
        return path if path != "/" else ""
    if path == base:
        return ""
    if path.startswith(base + "/"):
        return path[len(base) :]
    return None


def fs_location(
    entries: list[MountEntry], real: str, st_dev: int
) -> tuple[tuple[int, int], str] | None:
    """(device, path inside the file system) of the real path `real`, or None.

    The mount is the one on top (the deepest mount point holding `real`, the
    last of equals).  None when its device is not `st_dev`'s: the numbers
    cannot be related (a btrfs subvolume inside a mount has its own st_dev).
    """
    device = (os.major(st_dev), os.minor(st_dev))
    best: tuple[int, MountEntry, str] | None = None
    for entry in entries:
        rel = _below(real, entry.mount_point)
        if rel is None:
            continue
        depth = len(entry.mount_point)
        if best is None or depth >= best[0]:
            best = (depth, entry, rel)
    if best is None or best[1].device != device:
        return None
    _, entry, rel = best
    root = entry.root.rstrip("/")
    return device, (root + rel) or "/"


def fs_below(inner: str, outer: str) -> str | None:
    """`inner` relative to `outer` (file-system paths), or None when not below."""
    return _below(inner, outer)
