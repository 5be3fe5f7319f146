"""Reading the audit directory for the chain verifier (shared by bxctl and brokerd).


The verifier (`boxmaker.proto.audit._verify`) does no I/O; this module walks the
directory: every ``*.jsonl`` entry in name order, day files fed line by line,
any other ``.jsonl`` name (or a day name that is not a regular file) listed
as ignored.  Other names (``.lock``, editor files) are not the log's and are
passed over.  Files are read in large blocks; nothing is written.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from ._state_files import open_regular
from .proto.audit import (
    DAY_FILE_SUFFIX,
    ChainReport,
    ChainVerifier,
    OnLine,
    OnRecord,
    is_day_file_name,
)

BLOCK = 4 * 1024 * 1024

Progress = Callable[[int], None]
"""Called with the number of bytes just read."""


@attrs.frozen(kw_only=True)
class LogFile:
    name: str
    path: Path
    size: int
    day_file: bool
    """A regular file with a day name: its lines are part of the chain."""


def list_log_files(directory: Path) -> list[LogFile]:
    """The ``.jsonl`` entries of `directory`, in name order.  Raises OSError."""
    found: list[LogFile] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if not name.endswith(DAY_FILE_SUFFIX):
                continue
            st = entry.stat(follow_symlinks=False)
            regular = stat.S_ISREG(st.st_mode)
            found.append(LogFile(name=name, path=Path(entry.path), size=st.st_size if regular
                                 else 0, day_file=regular and is_day_file_name(name)))
    found.sort(key=lambda f: f.name)
    return found


def log_size(directory: Path) -> int:
    """Bytes in the day files (for a progress bar)."""
    return sum(f.size for f in list_log_files(directory) if f.day_file)


def iter_lines(path: Path, progress: Progress | None = None) -> Iterator[tuple[bytes, bool]]:
    """(content without ``\\n``, had a ``\\n``) for each line of a file."""
    with os.fdopen(open_regular(path), "rb") as stream:  # a FIFO never blocks here
        carry = b""
        while True:
            block = stream.read(BLOCK)
            if not block:
                break
            if progress is not None:
                progress(len(block))
            parts = (carry + block).split(b"\n") if carry else block.split(b"\n")
            carry = parts.pop()
            for part in parts:
                yield part, True
        if carry:
            yield carry, False


def feed_directory(verifier: ChainVerifier, directory: Path,
                   progress: Progress | None = None) -> None:
    """Feed every file of `directory` to `verifier` in name order.  Raises OSError."""
    for log_file in list_log_files(directory):
        if not log_file.day_file:
            verifier.ignore_file(log_file.name)
            continue
        if not verifier.begin_file(log_file.name):  # pragma: no cover - names agree
            continue
        feed = verifier.feed_content
        for content, newline in iter_lines(log_file.path, progress):
            feed(content, newline)
        verifier.end_file()


def verify_directory(
    directory: Path,
    *,
    expect_head: tuple[int, str] | None = None,
    on_record: OnRecord | None = None,
    on_line: OnLine | None = None,
    progress: Progress | None = None,
) -> ChainReport:
    """Verify the audit log in `directory`.  Raises OSError when it cannot be read.

    `on_line` sees every line the verifier takes into the chain, in order, in the
    same read (bxctl grants replay decides while it verifies)."""
    verifier = ChainVerifier(expect_head=expect_head, on_record=on_record, on_line=on_line)
    feed_directory(verifier, directory, progress)
    return verifier.finish()
