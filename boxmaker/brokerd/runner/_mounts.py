"""The host side of a file tool's mount (08-runner).

podman follows symbolic links in a mount source, so before a call runs brokerd
walks the host path from the grant path down to the requested path with
``O_NOFOLLOW`` and refuses the call (``unsafe_target``; nothing runs) if any
existing component is a symbolic link.  The grant path itself must be a real
directory (or, for a file grant, a real file).  The walk stops at the first
component that does not exist (write_file may create it).
"""

from __future__ import annotations

import errno
import os
import stat

import attrs

SYMLINK_MESSAGE = "symbolic link in path"
# podman's --mount is a comma-separated list of key=value options: a source
# with a comma cannot be carried in it.
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


class UnsafeTarget(Exception):
    """The call must not run: its path is not safe to mount."""


@attrs.frozen(kw_only=True)
class Mount:
    """One bind mount: the host path at the same path inside, read-only or not."""

    source: str
    destination: str
    read_only: bool

    def argument(self) -> str:
        """The value of podman's ``--mount`` for this mount."""
        parts = [
            "type=bind",
            f"source={self.source}",
            f"destination={self.destination}",
            "ro=true" if self.read_only else "rw=true",
            "nosuid",
            "nodev",
            "noexec",
        ]
        return ",".join(parts)


def _is_below(path: str, grant: str) -> bool:
    return path == grant or path.startswith(grant + "/")


def check_host_path(grant_path: str, requested: str, *, writable: bool) -> Mount:
    """The mount for a file tool's call, after the O_NOFOLLOW walk of the host path.

    Raises UnsafeTarget when the call must not run.
    """
    if not grant_path.startswith("/") or grant_path == "/":
        raise UnsafeTarget("the grant path is not an absolute path below /")
    if not _is_below(requested, grant_path):
        raise UnsafeTarget("the requested path is not at or below the grant path")
    if writable and any(_is_below(grant_path, d) for d in IMAGE_SYSTEM_DIRS):
        raise UnsafeTarget(
            "a write grant inside the tools image's system directories cannot be mounted"
        )
    if any(c in grant_path for c in _MOUNT_UNSAFE):
        raise UnsafeTarget("the grant path holds a comma or a quote, which podman cannot mount")
    # The grant path is the owner's: symbolic links above it are theirs to
    # have; the grant path itself must not be one.
    try:
        fd = os.open(grant_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeTarget(f"{SYMLINK_MESSAGE} (the grant path itself)") from exc
        why = os.strerror(exc.errno or 0)
        raise UnsafeTarget(f"the grant path cannot be opened ({why})") from exc
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            if requested != grant_path:
                raise UnsafeTarget("the grant path is a file, not a directory")
        elif not stat.S_ISDIR(mode):
            raise UnsafeTarget("the grant path is neither a directory nor a regular file")
        else:
            _walk_below(fd, requested[len(grant_path) :])
    finally:
        os.close(fd)
    return Mount(source=grant_path, destination=grant_path, read_only=not writable)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _unchecked(exc: OSError) -> UnsafeTarget:
    return UnsafeTarget(f"the path cannot be checked ({os.strerror(exc.errno or 0)})")


def _walk_below(grant_fd: int, rest: str) -> None:
    """Walk `rest` ("" or "/a/b") below the open grant directory."""
    names = [n for n in rest.split("/") if n]
    fd = os.dup(grant_fd)
    try:
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:
                    return
                raise _unchecked(exc) from exc
            if stat.S_ISLNK(st.st_mode):
                raise UnsafeTarget(SYMLINK_MESSAGE)
            if not stat.S_ISDIR(st.st_mode):
                return
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafeTarget(SYMLINK_MESSAGE) from exc
                raise _unchecked(exc) from exc
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
