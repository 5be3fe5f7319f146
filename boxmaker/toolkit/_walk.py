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


# -- mount what was checked (issue 10) ---------------------------------------------


class Checked:
    """What brokerd checked on the host: the mount root's and the target's identity.

    After its own O_NOFOLLOW walk and before any read or write the toolkit
    compares them with what it opened; any difference is ``mount_mismatch``
    (the host path was swapped between brokerd's walk and podman's mount).
    """

    def __init__(
        self,
        root_path: str,
        root_id: tuple[int, int],
        target_id: tuple[int, int] | None,
        created: bool,
    ) -> None:
        self.root_path = root_path
        self.root_id = root_id
        self.target_id = target_id
        self.created = created

    @classmethod
    def parse(cls, value: object) -> Checked:
        if not isinstance(value, dict) or set(value) != {"root", "target", "created"}:
            raise ToolError("bad_request", "checked must be {root, target, created}")
        root = value["root"]
        if not isinstance(root, dict) or set(root) != {"path", "dev", "ino"}:
            raise ToolError("bad_request", "checked.root must be {path, dev, ino}")
        if not isinstance(root["path"], str):
            raise ToolError("bad_request", "checked.root.path must be a string")
        target = value["target"]
        if target is not None and (not isinstance(target, dict) or set(target) != {"dev", "ino"}):
            raise ToolError("bad_request", "checked.target must be {dev, ino} or null")
        created = value["created"]
        if not isinstance(created, bool):
            raise ToolError("bad_request", "checked.created must be a boolean")
        return cls(
            root["path"],
            (_number(root["dev"]), _number(root["ino"])),
            None if target is None else (_number(target["dev"]), _number(target["ino"])),
            created,
        )

    def verify_root(self) -> None:
        """Open the mount root (O_NOFOLLOW walk) and compare it."""
        parent, name = open_parent(self.root_path)
        try:
            fd = open_last(parent, name, os.O_PATH)
        finally:
            os.close(parent)
        try:
            _same(fd, self.root_id, "the mount root")
        finally:
            os.close(fd)

    def verify_target(self, fd: int) -> None:
        """Compare the opened target (when brokerd saw one)."""
        if self.target_id is not None:
            _same(fd, self.target_id, "the target")

    def verify_parent(self, fd: int, path: str) -> None:
        """For a new file: its directory is the mount root brokerd checked."""
        if self.target_id is None and os.path.dirname(path) == self.root_path:
            _same(fd, self.root_id, "the directory")


def _number(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolError("bad_request", "checked: dev and ino must be non-negative integers")
    return value


def _same(fd: int, expected: tuple[int, int], what: str) -> None:
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != expected:
        raise ToolError(
            "mount_mismatch", f"{what} is not the object brokerd checked (the path was swapped)"
        )
