"""The host side of a file tool's mounts (08-runner "Mounts", as amended by issue 10).

`plan_file_call` walks the host path (`HostWalker`: an O_PATH walk that follows
the owner's symbolic links above the grant path, refuses any below it, checks
who owns each component and compares each directory with the protected
roots), then picks the narrowest mount:

- read_file and list_dir: the target itself, read-only (when it does not exist,
  the deepest existing directory at or below the grant path, read-only, so that
  the toolkit answers not_found);
- write_file replace/append: the existing file itself, read-write;
  create (or a target that does not exist yet): its parent directory,
  read-write, when that parent is at or below the grant path; under a file
  grant brokerd creates the empty file itself through the checked directory
  (``O_CREAT|O_EXCL|O_NOFOLLOW``) and mounts that file;
- inside every directory mount, each existing protected root and each
  existing path a relevant `deny` grant covers is masked (a directory by an
  empty read-only directory, anything else by an empty read-only file, both
  brokerd's, bound over it: podman 4.3 mounts a tmpfs before the binds, so a
  tmpfs mask would end up hidden under the directory it should mask).

The mount source is the real path the walk read back; the plan carries the
``(st_dev, st_ino)`` of the mount root and the target, which the toolkit
compares with what it finds inside (``mount_mismatch``), so a path swapped
between this walk and podman's own lookup never reaches a tool.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from typing import Any

import attrs

from ..._protected import ProtectedSet, Root
from ...proto.tools import CATALOGUE
from ._host_walk import (
    SYMLINK_MESSAGE,
    HostWalker,
    UnsafeTarget,
    Walked,
    protected_message,
    sticky_shared,
)

__all__ = [
    "IMAGE_SYSTEM_DIRS",
    "SYMLINK_MESSAGE",
    "CallPlan",
    "MaskSources",
    "Mount",
    "UnsafeTarget",
    "plan_file_call",
]

# podman's --mount is a comma-separated list of key=value options: a path with
# a comma cannot be carried in it.
_MOUNT_UNSAFE = (",", '"')

# The tools image's own directories: a read-write mount at or below one of
# them could change the program that runs in later calls (python's import path
# is under /usr), so a write grant there is never mounted.  Read-only mounts
# there are host content the model cannot write through the toolkit.
IMAGE_SYSTEM_DIRS = (
    "/usr",
    "/etc",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/var",
    "/run",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
)


@attrs.frozen(kw_only=True)
class Mount:
    """One bind mount: a host path at a path inside, read-only or not."""

    source: str
    destination: str
    read_only: bool
    noexec: bool = True
    """False only for run_command's grant entries (a test suite runs its tree's scripts)."""

    def argument(self) -> str:
        """The value of podman's ``--mount`` for this mount."""
        parts = [
            "type=bind",
            f"source={self.source}",
            f"destination={self.destination}",
            "ro=true" if self.read_only else "rw=true",
            # Not recursive: no mount below the source (a bind mount of
            # brokerd's home inside a granted directory) reaches the container.
            "bind-nonrecursive=true",
            "nosuid",
            "nodev",
        ]
        if self.noexec:
            parts.append("noexec")
        return ",".join(parts)


@attrs.frozen(kw_only=True)
class MaskSources:
    """brokerd's empty read-only directory and file, bound over what is masked."""

    directory: str
    file: str


@attrs.frozen(kw_only=True)
class CallPlan:
    """The mounts of one file call and what the toolkit must find inside."""

    mounts: tuple[Mount, ...]
    root: str
    """The main mount's destination (inside the container)."""
    root_id: tuple[int, int]
    target_id: tuple[int, int] | None
    """The target's identity when it existed (or brokerd created it)."""
    created: bool = False
    """brokerd created the (empty) target itself (write_file under a file grant)."""

    def checked(self) -> dict[str, Any]:
        """The request's ``checked`` member (the toolkit compares it)."""
        return {
            "root": {"path": self.root, "dev": self.root_id[0], "ino": self.root_id[1]},
            "target": (
                None
                if self.target_id is None
                else {"dev": self.target_id[0], "ino": self.target_id[1]}
            ),
            "created": self.created,
        }


def _is_below(path: str, base: str) -> bool:
    return path == base or path.startswith(base + "/")


def _no_comma(text: str, what: str) -> None:
    if any(c in text for c in _MOUNT_UNSAFE):
        raise UnsafeTarget(f"{what} holds a comma or a quote, which podman cannot mount")


def _writes(tool: str) -> bool:
    """The tool writes where its path is (its catalogue entry): a read-write mount."""
    entry = CATALOGUE.get(tool)
    return entry is not None and entry.writes


def plan_file_call(
    walker: HostWalker,
    *,
    tool: str,
    path: str,
    grant_path: str,
    mode: str | None,
    deny_paths: Sequence[str],
    masks: MaskSources,
) -> CallPlan:
    """The mounts for one file call, after the host walk.  Raises UnsafeTarget."""
    if not grant_path.startswith("/") or grant_path == "/":
        raise UnsafeTarget("the grant path is not an absolute path below /")
    if not _is_below(path, grant_path):
        raise UnsafeTarget("the requested path is not at or below the grant path")
    writable = _writes(tool)
    if writable and any(_is_below(grant_path, d) for d in IMAGE_SYSTEM_DIRS):
        raise UnsafeTarget(
            "a write grant inside the tools image's system directories cannot be mounted"
        )
    _no_comma(grant_path, "the grant path")
    _no_comma(path, "the path")
    walker.check_roots()
    parent_text, last = posixpath.split(grant_path)
    below_names = [n for n in path[len(grant_path) :].split("/") if n]
    above = walker.walk(parent_text, follow=True, spelled=path, tail=[last, *below_names])
    try:
        if above.rest:
            raise UnsafeTarget(f"the grant path cannot be opened ({os.strerror(2)})")
        if not stat.S_ISDIR(above.st.st_mode):
            raise UnsafeTarget("the grant path cannot be opened (not a directory above it)")
        grant = walker.walk(last, above, follow=False, spelled=path, tail=below_names)
    finally:
        above.close()
    try:
        return _plan(walker, grant, tool, path, grant_path, mode, deny_paths, masks)
    finally:
        grant.close()


def _plan(
    walker: HostWalker,
    grant: Walked,
    tool: str,
    path: str,
    grant_path: str,
    mode: str | None,
    deny_paths: Sequence[str],
    masks: MaskSources,
) -> CallPlan:
    writable = _writes(tool)
    grant_exists = not grant.rest
    if grant_exists:
        kind = grant.st.st_mode
        if stat.S_ISREG(kind):
            if path != grant_path:
                raise UnsafeTarget("the grant path is a file, not a directory")
        elif not stat.S_ISDIR(kind):
            raise UnsafeTarget("the grant path is neither a directory nor a regular file")
        below = walker.walk(path[len(grant_path) :], grant, follow=False, spelled=path)
    elif writable and path == grant_path and len(grant.rest) == 1:
        below = None
    else:
        raise UnsafeTarget("the grant path cannot be opened (No such file or directory)")
    if below is None:
        # A file grant whose file does not exist yet: brokerd creates it.
        return _create_under_file_grant(walker, grant, path, grant_path)
    try:
        real_target = posixpath.join(below.real, *below.rest)
        covering = walker.protected.covering(real_target)
        if covering is not None:
            raise UnsafeTarget(protected_message(path, real_target))
        exists = not below.rest
        # Where the deepest existing object sits inside the container.
        inside = path if exists else _strip(path, len(below.rest))
        if exists:
            target_id: tuple[int, int] | None = (below.st.st_dev, below.st.st_ino)
            # By the inode the walk opened, whatever its name (issue 22 item 6).
            walker.check_links(path, below.st)
            is_file = stat.S_ISREG(below.st.st_mode)
            rw = writable and is_file and mode in ("replace", "append")
            if rw and below.st.st_nlink > 1:
                # Written through every name: one of them may be inside a
                # protected root, where no walk of this path can look.
                raise UnsafeTarget(
                    f"{path}: the file has {below.st.st_nlink} hard links; it is not written"
                )
            if stat.S_ISDIR(below.st.st_mode):
                rw = False
            return _mount_plan(walker, below, inside, rw, target_id, tool, deny_paths, masks)
        parent_inside = inside
        can_create = (
            writable
            and len(below.rest) == 1
            and stat.S_ISDIR(below.st.st_mode)
            and _is_below(parent_inside, grant_path)
        )
        return _mount_plan(walker, below, inside, can_create, None, tool, deny_paths, masks)
    finally:
        below.close()


def _strip(path: str, count: int) -> str:
    for _ in range(count):
        path = posixpath.dirname(path)
    return path


def _create_under_file_grant(
    walker: HostWalker, parent: Walked, path: str, grant_path: str
) -> CallPlan:
    name = parent.rest[0]
    real = posixpath.join(parent.real, name)
    if walker.protected.covering(real) is not None:
        raise UnsafeTarget(protected_message(path, real))
    if sticky_shared(parent.st):
        raise UnsafeTarget(f"{path}: its directory is a shared sticky directory")
    walker.locate(path, parent.real, parent.st, [name])
    # O_PATH descriptors cannot be used as dir_fd for creating: reopen the
    # checked directory through /proc, which names the object, not the path.
    dfd = os.open(f"/proc/self/fd/{parent.fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if (os.fstat(dfd).st_dev, os.fstat(dfd).st_ino) != (parent.st.st_dev, parent.st.st_ino):
            raise UnsafeTarget(f"{path}: the path changed while it was checked")
        try:
            fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=dfd,
            )
        except FileExistsError as exc:
            raise UnsafeTarget(f"{path}: the path changed while it was checked") from exc
        except OSError as exc:
            raise UnsafeTarget(
                f"{path}: the file cannot be created ({os.strerror(exc.errno or 0)})"
            ) from exc
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)
    mount = Mount(source=real, destination=path, read_only=False)
    ident = (st.st_dev, st.st_ino)
    return CallPlan(mounts=(mount,), root=path, root_id=ident, target_id=ident, created=True)


def _mount_plan(
    walker: HostWalker,
    at: Walked,
    inside: str,
    rw: bool,
    target_id: tuple[int, int] | None,
    tool: str,
    deny_paths: Sequence[str],
    masks: MaskSources,
) -> CallPlan:
    if sticky_shared(at.st):
        raise UnsafeTarget(f"{inside}: a shared sticky directory is never mounted")
    _no_comma(at.real, "the real path")
    roots_inside = walker.locate(inside, at.real, at.st)
    main = Mount(source=at.real, destination=inside, read_only=not rw)
    mounts = [main]
    if stat.S_ISDIR(at.st.st_mode):
        mounts += _masks(walker.protected, at.real, inside, deny_paths, masks, roots_inside)
    root_id = (at.st.st_dev, at.st.st_ino)
    return CallPlan(mounts=tuple(mounts), root=inside, root_id=root_id, target_id=target_id)


def _masks(
    protected: ProtectedSet,
    real_dir: str,
    inside: str,
    deny_paths: Sequence[str],
    masks: MaskSources,
    roots_inside: Sequence[tuple[Root, str]] = (),
) -> list[Mount]:
    """Masks for what lies inside a directory mount and no tool may see."""
    rels: dict[str, bool] = {}
    for root, rel in roots_inside:
        # Found by its place in the file system: reached through a bind mount.
        if os.path.lexists(real_dir.rstrip("/") + rel):
            rels[rel] = root.is_dir
    for root in protected.below(real_dir):
        try:
            st = os.lstat(root.real)
        except OSError:
            continue  # not there: nothing to see
        rels[root.real[len(real_dir) :]] = stat.S_ISDIR(st.st_mode)
    for deny in deny_paths:
        for spelled, base in ((deny, inside), (os.path.realpath(deny), real_dir)):
            if spelled != base and spelled.startswith(base.rstrip("/") + "/"):
                rel = spelled[len(base.rstrip("/")) :]
                try:
                    st = os.lstat(real_dir.rstrip("/") + rel)
                except OSError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    continue  # the toolkit never follows it
                rels.setdefault(rel, stat.S_ISDIR(st.st_mode))
    out: list[Mount] = []
    kept: list[str] = []
    for rel in sorted(rels):
        if any(rel.startswith(k + "/") for k in kept):
            # Already hidden by the mask above it (issue 22 item 7): a mount
            # point inside that empty read-only directory cannot be made.
            continue
        kept.append(rel)
        dest = inside.rstrip("/") + rel
        _no_comma(dest, "a masked path")
        source = masks.directory if rels[rel] else masks.file
        out.append(Mount(source=source, destination=dest, read_only=True))
    return out
