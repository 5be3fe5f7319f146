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

from ._state_files import NotRegularFile, open_regular
from .proto.audit import (
    DAY_FILE_SUFFIX,
    ChainReport,
    ChainVerifier,
    OnBlock,
    OnLine,
    OnRecord,
    PinFile,
    is_day_file_name,
)

PIN_FILE_MAX = 16 * 1024 * 1024
"""A pin file larger than this is not one (1024 tools of a 4 MiB list, with their hashes)."""

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
        feed_whole_lines(verifier, log_file.path, progress)
        verifier.end_file()


def feed_whole_lines(verifier: ChainVerifier, path: Path, progress: Progress | None) -> None:
    """A file's lines to `verifier`, as `iter_lines` cuts them: the whole lines of
    each block read at once (`feed_block`), a last line without newline alone."""
    with os.fdopen(open_regular(path), "rb") as stream:  # a FIFO never blocks here
        carry = b""
        while True:
            block = stream.read(BLOCK)
            if not block:
                break
            if progress is not None:
                progress(len(block))
            if carry:
                block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                verifier.feed_block(block[:cut] if carry else block)
        if carry:
            verifier.feed_content(carry, False)


def verify_directory(
    directory: Path,
    *,
    expect_head: tuple[int, str] | None = None,
    on_record: OnRecord | None = None,
    on_line: OnLine | None = None,
    on_block: OnBlock | None = None,
    progress: Progress | None = None,
) -> ChainReport:
    """Verify the audit log in `directory`.  Raises OSError when it cannot be read.

    `on_line` sees every line the verifier takes into the chain, in order, in the
    same read (bxctl grants replay decides while it verifies)."""
    verifier = ChainVerifier(expect_head=expect_head, on_record=on_record, on_line=on_line,
                             on_block=on_block, pin_file=pin_reader(directory))
    feed_directory(verifier, directory, progress)
    return verifier.finish()


def pin_reader(directory: Path) -> PinFile:
    """digest -> the bytes of ``directory/pins/<digest>.json`` (None when absent).

    A pin path that is not a regular file (a planted symbolic link) or is over
    PIN_FILE_MAX reads as ``b""``: not a pin, so the verifier says `bad_pin`.
    Other errors (permissions) go up as OSError, as for the day files.
    """
    return pins_reader(directory / "pins")


def pins_reader(pins: Path) -> PinFile:
    """`pin_reader` of a pins directory named as such (bxctl's `--pins`)."""

    def read(digest: str) -> bytes | None:
        try:
            fd = open_regular(pins / f"{digest}.json")
        except FileNotFoundError:
            return None
        except NotRegularFile:
            return b""
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(PIN_FILE_MAX + 1)
        return b"" if len(data) > PIN_FILE_MAX else data

    return read
