"""Reading the grants directory: the one place the policy does I/O.

`load_grants(directory)` reads every ``*.toml`` entry and parses the set
(`_grants.py`); a missing directory raises `GrantsMissing`.  `GrantsWatcher`
is what brokerd calls on every decision: it compares a cheap fingerprint
(names, sizes, mtimes, ctimes, inodes) and re-reads only when it changed.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from .._errors import ConfigurationError
from ._grants import GrantFile, parse_grant_files
from ._model import EMPTY_DIGEST, GrantsReport, GrantState, InvalidGrantSet

SUFFIX: Final = b".toml"
MAX_FILE_BYTES: Final = 16 * 1024 * 1024
"""A grant file larger than this is reported (G1) rather than read whole."""

Fingerprint = tuple[tuple[bytes, int, int, int, int, int], ...]
"""Per ``*.toml`` entry: name, size, mtime_ns, ctime_ns, inode, device (sorted)."""


class GrantsMissing(ConfigurationError):
    """The grants directory does not exist (an environment problem)."""

    runbook = "docs/runbook.md#grants-missing"

    def __init__(self, directory: Path, *, commands_path: Sequence[str] = ()) -> None:
        self.directory = directory
        self.commands_path = tuple(commands_path)
        super().__init__(
            f"the grants directory {os.fsdecode(directory)!r} does not exist; "
            "every call is denied"
        )


def _entry_names(directory: Path) -> list[bytes]:
    try:
        names = os.listdir(os.fsencode(directory))
    except FileNotFoundError:
        raise GrantsMissing(directory) from None
    except NotADirectoryError:
        raise GrantsMissing(directory) from None
    return sorted(name for name in names if name.endswith(SUFFIX))


def _display(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


def _read_one(directory: Path, name: bytes) -> GrantFile:
    shown = _display(name)
    path = os.path.join(os.fsencode(directory), name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return GrantFile(name=shown, name_bytes=name, content=b"", error=exc.strerror or str(exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return GrantFile(name=shown, name_bytes=name, content=b"", error="not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            return GrantFile(
                name=shown,
                name_bytes=name,
                content=b"",
                error=f"larger than {MAX_FILE_BYTES} bytes",
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_FILE_BYTES:
                return GrantFile(
                    name=shown,
                    name_bytes=name,
                    content=b"",
                    error=f"larger than {MAX_FILE_BYTES} bytes",
                )
            chunks.append(chunk)
        return GrantFile(name=shown, name_bytes=name, content=b"".join(chunks))
    except OSError as exc:
        return GrantFile(name=shown, name_bytes=name, content=b"", error=exc.strerror or str(exc))
    finally:
        os.close(fd)


def load_grants(directory: Path, *, commands_path: Sequence[str] = ()) -> GrantState:
    """Read and parse every ``*.toml`` file of `directory` (other files are ignored);
    `commands_path` is brokerd's `[commands] path`, for G21."""
    return parse_grant_files((_read_one(directory, name) for name in _entry_names(directory)),
                             commands_path=commands_path)


SETTLED_NS: Final = 2_000_000_000
"""A directory whose ctime is older than this is listed again only when its stat
changes.  A younger one may change again within the tick of its timestamps
(the coarse clock), unseen by its stat, so it is listed on every check."""


class DirectoryListing:
    """The ``*.toml`` names of one directory, listed again only when the directory's
    own stat (device, inode, mtime, ctime) changed or it changed too recently to
    trust that (`SETTLED_NS`).  Adding, removing or renaming an entry always
    changes the directory's mtime and ctime, so a settled, unchanged stat means
    the same names; what is inside each file is the fingerprint's own stat."""

    def __init__(self, *, now_ns: Callable[[], int] = time.time_ns) -> None:
        self._now_ns = now_ns
        self._key: tuple[int, int, int, int] | None = None
        self._names: list[bytes] = []

    def names(self, directory: Path) -> list[bytes]:
        try:
            info = os.stat(os.fsencode(directory))
        except (FileNotFoundError, NotADirectoryError):
            self._key = None
            raise GrantsMissing(directory) from None
        key = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
        if key == self._key and self._now_ns() - info.st_ctime_ns > SETTLED_NS:
            return self._names
        names = _entry_names(directory)
        self._key, self._names = key, names
        return names


def fingerprint(directory: Path, listing: DirectoryListing | None = None) -> Fingerprint | None:
    """The cheap change check: None when the directory is missing.  With a
    `listing`, the directory is read again only when it may have changed."""
    try:
        names = _entry_names(directory) if listing is None else listing.names(directory)
    except GrantsMissing:
        return None
    base = os.fsencode(directory)
    out: list[tuple[bytes, int, int, int, int, int]] = []
    for name in names:
        try:
            info = os.stat(os.path.join(base, name))
        except OSError:
            out.append((name, -1, -1, -1, -1, -1))
            continue
        out.append(
            (name, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)
        )
    return tuple(out)


def missing_state() -> InvalidGrantSet:
    """The grant state while the directory does not exist."""
    return InvalidGrantSet(
        report=GrantsReport(ok=False, count=0, digest=EMPTY_DIGEST, problems=[]), missing=True
    )


_UNSET: Final = object()


class GrantsWatcher:
    """Re-reads the grant set whenever the directory's fingerprint changes.

    `refresh()` is cheap when nothing changed (one listdir and a stat per
    file).  It returns the current state and whether it differs from the
    previous one (validity, digest or presence; True on the first call).
    """

    def __init__(self, directory: Path, *, commands_path: Sequence[str] = ()) -> None:
        self.directory = directory
        self.commands_path = tuple(commands_path)
        self._fingerprint: object = _UNSET
        self._listing = DirectoryListing()
        self._state: GrantState = missing_state()

    @property
    def state(self) -> GrantState:
        return self._state

    def refresh(self) -> tuple[GrantState, bool]:
        before = self._fingerprint
        current = fingerprint(self.directory, self._listing)
        if before is not _UNSET and current == before:
            return self._state, False
        old = self._state
        if current is None:
            new: GrantState = missing_state()
        else:
            try:
                new = load_grants(self.directory, commands_path=self.commands_path)
            except GrantsMissing:
                new, current = missing_state(), None
        self._fingerprint = current
        self._state = new
        changed = before is _UNSET or (
            old.ok != new.ok
            or old.digest != new.digest
            or isinstance(old, InvalidGrantSet) != isinstance(new, InvalidGrantSet)
            or (
                isinstance(old, InvalidGrantSet)
                and isinstance(new, InvalidGrantSet)
                and old.missing != new.missing
            )
        )
        return new, changed
