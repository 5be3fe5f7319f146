"""The host walk of a file tool's path (08-runner "Mounts", issue 10).

One ``O_PATH`` walk from ``/``, component by component, decides by what the
kernel opens, never by how the path is spelled:

- symbolic links above the grant path are followed (the owner's to have), by
  reading each link and walking its target the same way; below the grant path
  a symbolic link refuses the call ("symbolic link in path");
- every component opened, symbolic links included, must be owned by 0 or by
  brokerd's uid, and (links aside) have no group or other write bit, except a
  root-owned sticky directory (such as /tmp) whose next component is owned by 0
  or brokerd's uid: otherwise another uid could swap it between the check and
  the mount;
- every directory on the chain and the target are compared with the protected
  roots' ``(st_dev, st_ino)``, so a bind mount of brokerd's home elsewhere is
  still brokerd's home;
- what was opened is read back (``/proc/self/fd``) and must be the real path
  the walk computed.

The walk ends at the first component that does not exist (write_file may
create it).  It raises `UnsafeTarget`; it keeps the last descriptor open for
the caller (who must close it).
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Sequence

import attrs

from ..._errors import PeerError
from ..._protected import ProtectedSet, Root
from ._inodes import ProtectedInodes
from ._mountinfo import fs_below, fs_location, read_mountinfo

SYMLINK_MESSAGE = "symbolic link in path"
_MAX_LINKS = 40
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeTarget(PeerError):
    """The call must not run: its path is not safe to mount."""


def protected_message(path: str, real: str) -> str:
    return f"{path}: protected (real path {real})"


@attrs.define
class Walked:
    """Where a walk ended: an open O_PATH descriptor and what it is."""

    fd: int
    real: str
    st: os.stat_result
    rest: list[str]
    """Components below `real` that did not exist (empty when all did)."""

    def close(self) -> None:
        os.close(self.fd)


def _owner_problem(st: os.stat_result, uid: int) -> str | None:
    # In a shared sticky directory this rule is what keeps the next
    # component from being another uid's to rename or replace.
    if st.st_uid not in (0, uid):
        return f"owned by uid {st.st_uid}"
    if stat.S_ISLNK(st.st_mode):
        return None
    if st.st_mode & 0o022 and not sticky_shared(st):
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def sticky_shared(st: os.stat_result) -> bool:
    """A root-owned sticky directory that others may write (such as /tmp)."""
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == 0
        and bool(st.st_mode & stat.S_ISVTX)
        and bool(st.st_mode & 0o022)
    )


class HostWalker:
    """Walks host paths for one runtime: brokerd's uid and its protected roots."""

    def __init__(self, uid: int, protected: ProtectedSet) -> None:
        self.uid = uid
        self.protected = protected
        self._tail: list[str] = []
        self.inodes = ProtectedInodes(protected.roots)
        # Each protected root's place in its file system, found once: a bind
        # mount elsewhere shows the same place under another path.
        entries = read_mountinfo()
        self._locations: list[tuple[Root, tuple[int, int], str]] = []
        for root in protected.roots:
            if root.dev < 0:
                continue
            loc = fs_location(entries, root.real, root.dev)
            if loc is not None:
                self._locations.append((root, loc[0], loc[1]))

    def locate(
        self, spelled: str, real: str, st: os.stat_result, tail: Sequence[str] = ()
    ) -> list[tuple[Root, str]]:
        """The protected roots inside the object at `real`, with their paths below it.

        Raises UnsafeTarget when the object itself lies in a protected root,
        however it was reached (the file system's own paths decide).
        """
        loc = fs_location(read_mountinfo(), real, st.st_dev)
        if loc is None:
            # Not relatable (another device than its mount says): the real
            # path and identity checks of the walk still hold.
            return []
        device, fs_path = loc
        inside: list[tuple[Root, str]] = []
        for root, root_device, root_path in self._locations:
            if root_device != device:
                continue
            rel = fs_below(fs_path, root_path)
            if rel is not None:
                real_path = posixpath.normpath(root.real + rel) if rel else root.real
                full = posixpath.normpath(posixpath.join(real_path, *tail))
                raise UnsafeTarget(protected_message(spelled, full))
            below = fs_below(root_path, fs_path)
            if below:
                inside.append((root, below))
        return inside

    def check_links(self, spelled: str, st: os.stat_result) -> None:
        """A target with more than one link must not be a protected file (issue 22 item 6)."""
        if stat.S_ISDIR(st.st_mode) or st.st_nlink <= 1:
            return
        found = self.inodes.lookup(st.st_dev, st.st_ino)
        if found is not None:
            raise UnsafeTarget(f"{spelled}: protected (a hard link of {found})")
        if not self.inodes.complete:
            raise UnsafeTarget(
                f"{spelled}: the file has {st.st_nlink} hard links and the protected files "
                "are too many to index; it is not used"
            )

    def check_roots(self) -> None:
        """Every required protected root is still there, the same object."""
        if self.protected.unknown:
            raise UnsafeTarget(
                f"{self.protected.unknown[0]}: not known, so not protected; no file tool "
                "runs until brokerd restarts with podman answering"
            )
        if self.protected.missing:
            missing = self.protected.missing[0]
            raise UnsafeTarget(
                f"{missing}: a protected root is missing; no file tool runs until it "
                "exists and brokerd restarts"
            )
        for root in self.protected.roots:
            if not root.verify:
                continue
            try:
                st = os.stat(root.real)
            except OSError:
                st = None
            if st is None or (st.st_dev, st.st_ino) != (root.dev, root.ino):
                raise UnsafeTarget(
                    f"{root.path}: a protected root is missing or was replaced; no file "
                    "tool runs until brokerd restarts"
                )

    def _identity_check(
        self, spelled: str, real: str, st: os.stat_result, pending: list[str]
    ) -> None:
        root = self.protected.with_identity(st.st_dev, st.st_ino)
        at = root.real if root is not None else (
            real if self.protected.covering(real) is not None else None
        )
        if at is not None:
            # The real path of the whole target, as the kernel names it.
            full = posixpath.normpath(posixpath.join(at, *pending, *self._tail))
            raise UnsafeTarget(protected_message(spelled, full))

    def walk(
        self,
        path: str,
        start: Walked | None = None,
        *,
        follow: bool,
        spelled: str | None = None,
        tail: Sequence[str] = (),
    ) -> Walked:
        """Walk the absolute `path` (or, from `start`, the relative one).

        `follow`: symbolic links are followed (above the grant path) or refused.
        `spelled` and `tail`: the call's whole path and the components after
        this walk's, for the messages.
        """
        names = path
        path = spelled if spelled is not None else path
        self._tail = list(tail)
        if start is None:
            fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            cur = Walked(fd=fd, real="/", st=os.fstat(fd), rest=[])
            self._check_component(path, cur.st, None, "/")
        else:
            cur = Walked(fd=os.dup(start.fd), real=start.real, st=start.st, rest=[])
        pending = [n for n in names.split("/") if n not in ("", ".")]
        links = 0
        try:
            while pending:
                name = pending.pop(0)
                if name == "..":
                    self._up(cur, path)
                    continue
                try:
                    nfd = os.open(name, _PATH_FLAGS, dir_fd=cur.fd)
                except FileNotFoundError:
                    cur.rest = [name, *pending]
                    if any(n == ".." for n in cur.rest):
                        raise UnsafeTarget(f"{path}: '..' below a missing directory") from None
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOTDIR:
                        cur.rest = [name, *pending]
                        break
                    raise _unchecked(path, exc) from exc
                st = os.fstat(nfd)
                real = posixpath.join(cur.real, name)
                try:
                    self._check_component(path, st, cur.st, real)
                    if stat.S_ISLNK(st.st_mode):
                        if not follow:
                            raise UnsafeTarget(SYMLINK_MESSAGE)
                        links += 1
                        if links > _MAX_LINKS:
                            raise UnsafeTarget(f"{path}: too many symbolic links")
                        target = os.readlink("", dir_fd=nfd)
                        pending = [n for n in target.split("/") if n not in ("", ".")] + pending
                        if target.startswith("/"):
                            self._restart(cur, path)
                        continue
                    self._identity_check(path, real, st, pending)
                except BaseException:
                    os.close(nfd)
                    raise
                os.close(cur.fd)
                cur.fd, cur.real, cur.st = nfd, real, st
                if not stat.S_ISDIR(st.st_mode) and pending:
                    cur.rest = pending
                    break
            self._read_back(cur, path, cur.rest)
        except BaseException:
            cur.close()
            raise
        return cur

    def _check_component(
        self, path: str, st: os.stat_result, parent: os.stat_result | None, real: str
    ) -> None:
        problem = _owner_problem(st, self.uid)
        if problem is not None:
            raise UnsafeTarget(f"{path}: {real} is {problem}")

    def _restart(self, cur: Walked, path: str) -> None:
        fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        os.close(cur.fd)
        cur.fd, cur.real, cur.st = fd, "/", os.fstat(fd)

    def _up(self, cur: Walked, path: str) -> None:
        if cur.real == "/":
            return
        fd = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur.fd)
        os.close(cur.fd)
        cur.fd, cur.real, cur.st = fd, posixpath.dirname(cur.real), os.fstat(fd)
        # The parent was checked on the way down, unless the walk entered
        # through a bind mount; the read-back below catches a mismatch.
        self._read_back(cur, path, [])

    def _read_back(self, cur: Walked, path: str, pending: list[str]) -> None:
        try:
            opened = os.readlink(f"/proc/self/fd/{cur.fd}")
        except OSError as exc:
            raise _unchecked(path, exc) from exc
        if opened != cur.real:
            raise UnsafeTarget(f"{path}: the path changed while it was checked")
        if cur.real != "/":
            self._identity_check(path, cur.real, cur.st, pending)


def _unchecked(path: str, exc: OSError) -> UnsafeTarget:
    return UnsafeTarget(f"{path}: the path cannot be checked ({os.strerror(exc.errno or 0)})")
