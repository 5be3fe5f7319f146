"""The runner's scratch directory (08-runner, issue 10): private, not guessable.

Per-call egress directories, podman's working directory and the empty file
that masks protected files all live in ONE directory only brokerd owns (mode
0700, under its runtime directory: ``$XDG_RUNTIME_DIR/boxmaker`` or
``home/run``), and each per-call directory comes from `mkdtemp`.  Nothing is
at a predictable path in a shared directory such as /tmp, so another uid
cannot pre-create a name and stop every call.  brokerd empties the directory
at start and removes it at stop.  A failure says what it found.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..._paths import default_socket

_EMPTY = "empty"
_WORK = "work"


def default_scratch_root(home: Path, instance: str) -> Path:
    """``$XDG_RUNTIME_DIR/boxmaker/runner-<instance>``, or ``home/run/runner-<instance>``."""
    return default_socket(home, f"runner-{instance}")


def _describe(path: Path, st: os.stat_result) -> str:
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else (
        "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
    )
    return f"{path} is {kind} owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):04o}"


class Scratch:
    """brokerd's private scratch directory for the podman runner."""

    def __init__(self, root: Path, *, uid: int) -> None:
        self.root = root
        self.uid = uid
        self._work: Path | None = None
        self._empty: Path | None = None

    def _check(self) -> None:
        try:
            st = os.lstat(self.root)
        except OSError as exc:
            raise OSError(f"the runner's scratch directory {self.root} cannot be checked "
                          f"({exc.strerror})") from exc
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != self.uid or st.st_mode & 0o077:
            raise OSError(
                f"the runner's scratch directory is not private to brokerd "
                f"(uid {self.uid}, mode 0700): {_describe(self.root, st)}"
            )

    def reset(self) -> None:
        """At start: remove what an earlier run left, then make it afresh (0700)."""
        self.remove()
        try:
            self.root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.root.mkdir(mode=0o700)
        except OSError as exc:
            if not isinstance(exc, FileExistsError):
                raise OSError(f"the runner's scratch directory {self.root} cannot be made "
                              f"({exc.strerror})") from exc
        self._check()
        self._work = None
        self._empty = None

    def remove(self) -> None:
        """Remove the scratch directory when it is brokerd's own (never another uid's)."""
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode) and st.st_uid == self.uid:
            shutil.rmtree(self.root, ignore_errors=True)

    def _ensure(self) -> None:
        if not self.root.exists():
            self.reset()
        self._check()

    def work_dir(self) -> Path:
        """podman's working directory (conmon drops files there): made once."""
        if self._work is None or not self._work.is_dir():
            self._ensure()
            self._work = Path(tempfile.mkdtemp(prefix=f"{_WORK}-", dir=self.root))
        return self._work

    def call_dir(self, prefix: str) -> Path:
        """A fresh per-call directory (0700, from mkdtemp)."""
        self._ensure()
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))

    def mask_sources(self) -> tuple[Path, Path]:
        """An empty read-only directory and file, bound over what a mount must not show."""
        if self._empty is None or not self._empty.is_file():
            self._ensure()
            directory = Path(tempfile.mkdtemp(prefix=f"{_EMPTY}-", dir=self.root))
            empty = directory / _EMPTY
            fd = os.open(empty, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
            os.close(fd)
            (directory / "dir").mkdir(mode=0o500)
            self._empty = empty
        return self._empty.parent / "dir", self._empty
