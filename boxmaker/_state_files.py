"""Reading a daemon's own state files safely (issue 22 item 12): one helper for
brokerd, bxctl, the witness and the approval page.

A state file is opened ``O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC`` (so a FIFO
put in its place cannot block the open, and a symbolic link is not followed),
checked with ``fstat`` to be a regular file, and read with a bound.  What is not
a regular file is a `NotRegularFile` (an `OSError`, so a caller that already
copes with an unreadable file copes with it too) whose runbook pointer is
``state-file-not-regular``; a file above the bound is a `StateFileTooBig`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ._errors import DamagedError

FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFile(DamagedError, OSError):
    """A state file that is a FIFO, a device, a socket, a directory or a link."""

    runbook = "docs/runbook.md#state-file-not-regular"


class StateFileTooBig(DamagedError, OSError):
    """A state file bigger than its reader's bound."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | Path, *, dir_fd: int | None = None) -> int:
    """An fd of `path` open for reading, known to be a regular file.
    Raises FileNotFoundError, NotRegularFile, OSError."""
    try:
        fd = os.open(path, FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(f"{path} is a symbolic link, not a regular file") from None
        if exc.errno == errno.ENXIO:  # a socket (or a device without its driver)
            try:
                mode = os.lstat(path, dir_fd=dir_fd).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise NotRegularFile(f"{path} is {_kind(mode)}, not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path} is {_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, limit: int, name: str | Path) -> bytes:
    """At most `limit` bytes from `fd` to its end.  Raises StateFileTooBig."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise StateFileTooBig(f"{name} is more than {limit} bytes")


def read_regular(path: str | Path, limit: int, *, dir_fd: int | None = None) -> bytes:
    """The bytes of the regular file `path` (at most `limit`).
    Raises FileNotFoundError, NotRegularFile, StateFileTooBig, OSError."""
    fd = open_regular(path, dir_fd=dir_fd)
    try:
        return read_fd(fd, limit, path)
    finally:
        os.close(fd)
