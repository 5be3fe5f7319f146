"""Opening a path component by component with O_NOFOLLOW (08-runner).

The policy matched the path lexically; the file system may still hold a
symbolic link that points elsewhere.  Every component is opened relative to
its parent's descriptor with ``O_NOFOLLOW``, so a symbolic link anywhere in the
path is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import stat

from ._errors import SYMLINK_MESSAGE, ToolError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def split_path(path: str) -> list[bytes]:
    """The components of an absolute path (already of the policy's grammar)."""
    raw = os.fsencode(path)
    if not raw.startswith(b"/") or raw == b"/":
        raise ToolError("bad_request", "the path must be absolute and not /")
    parts = raw[1:].split(b"/")
    if any(p in (b"", b".", b"..") for p in parts):
        raise ToolError("bad_request", "the path is not in canonical form")
    return parts


def _is_symlink(name: bytes, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def os_error(exc: OSError, what: str) -> ToolError:
    """An OSError as a ToolError with a stable code."""
    codes = {
        errno.ENOENT: "not_found",
        errno.ENOTDIR: "not_a_directory",
        errno.EISDIR: "is_a_directory",
        errno.EEXIST: "exists",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.EROFS: "read_only",
        errno.ENOSPC: "no_space",
        errno.EDQUOT: "no_space",
        errno.ELOOP: "symlink",
    }
    code = codes.get(exc.errno or 0, "io_error")
    if code == "symlink":
        return ToolError("symlink", SYMLINK_MESSAGE)
    return ToolError(code, f"{what}: {os.strerror(exc.errno or 0)}")


def open_parent(path: str) -> tuple[int, bytes]:
    """Open the directory that holds `path`, walking from / with O_NOFOLLOW.

    Returns (descriptor of the parent, last component); the caller closes it.
    """
    parts = split_path(path)
    fd = os.open("/", _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if _is_symlink(name, fd):
                    raise ToolError("symlink", SYMLINK_MESSAGE) from exc
                raise os_error(exc, "a directory in the path") from exc
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def open_last(parent: int, name: bytes, flags: int, mode: int = 0o644) -> int:
    """Open the last component with O_NOFOLLOW; a symbolic link is refused."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP or _is_symlink(name, parent):
            raise ToolError("symlink", SYMLINK_MESSAGE) from exc
        raise os_error(exc, "the path") from exc


def open_path(path: str, flags: int, mode: int = 0o644) -> int:
    """Open `path` with every component checked; the caller closes the result."""
    parent, name = open_parent(path)
    try:
        return open_last(parent, name, flags, mode)
    finally:
        os.close(parent)
