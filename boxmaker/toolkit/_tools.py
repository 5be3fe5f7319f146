"""The file tools: read_file, list_dir, write_file (03-policy, 08-runner)."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Sequence
from typing import Any

from ._answer import Encoding, encode_answer, fit_content, fit_items, ok
from ._errors import ToolError
from ._walk import Checked, open_last, open_parent, open_path, os_error

MAX_WRITE_BYTES = 1024 * 1024
# The smallest list_dir entry encodes to more than this many bytes, so no more
# than cap // _MIN_ENTRY_BYTES entries can ever fit.
_MIN_ENTRY_BYTES = 40
# A directory with more names than this is listed from an arbitrary subset.
_MAX_NAMES = 1_000_000


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.read(fd, min(1 << 20, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_file(args: dict[str, Any], cap: int, checked: Checked | None = None) -> bytes:
    path = _str_arg(args, "path")
    _only(args, {"path"})
    # O_NONBLOCK: a FIFO or device must not block the open; it is refused below.
    fd = open_path(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if checked is not None:
            checked.verify_target(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ToolError("not_a_file", f"the path is {kind}")
        os.set_blocking(fd, True)
        # Neither encoding makes content shorter than its bytes, so no more
        # than `cap` bytes can ever be shown.
        try:
            data = _read_at_most(fd, cap + 1)
        except OSError as exc:
            raise os_error(exc, "reading the file") from exc
    finally:
        os.close(fd)
    complete = len(data) <= cap
    if not complete:
        data = data[:cap]
    size = max(st.st_size, len(data))

    def build(content: str, encoding: Encoding, truncated: bool) -> dict[str, Any]:
        return ok({"content": content, "encoding": encoding, "bytes": size, "truncated": truncated})

    return fit_content(data, complete=complete, cap=cap, build=build)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def list_dir(args: dict[str, Any], cap: int, checked: Checked | None = None) -> bytes:
    path = _str_arg(args, "path")
    _only(args, {"path"})
    fd = open_path(path, os.O_RDONLY | os.O_DIRECTORY)
    if checked is not None:
        try:
            checked.verify_target(fd)
        except BaseException:
            os.close(fd)
            raise
    # Entries are sorted by name before the cut, so a truncated listing is
    # the first names in byte order; only those that can fit are stat'ed.
    limit = cap // _MIN_ENTRY_BYTES + 1
    names: list[bytes] = []
    raw: list[tuple[bytes, int, int]] = []
    complete = True
    try:
        with os.scandir(fd) as it:
            for entry in it:
                if len(names) >= _MAX_NAMES:
                    complete = False
                    break
                names.append(os.fsencode(entry.name))
        names.sort()
        if len(names) > limit:
            complete = False
            del names[limit:]
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                mode, size = st.st_mode, st.st_size
            except OSError:
                mode, size = 0, 0
            raw.append((name, mode, size))
    except OSError as exc:
        raise os_error(exc, "listing the directory") from exc
    finally:
        os.close(fd)
    entries = [_entry(name, mode, size) for name, mode, size in raw]

    def build(items: Sequence[dict[str, Any]], truncated: bool) -> dict[str, Any]:
        return ok({"entries": list(items), "truncated": truncated})

    return fit_items(entries, complete=complete, cap=cap, build=build)


def _entry(name: bytes, mode: int, size: int) -> dict[str, Any]:
    try:
        text: str | None = name.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "name": text,
        "name_b64": base64.b64encode(name).decode("ascii"),
        "kind": _kind(mode),
        "bytes": size,
    }


_WRITE_FLAGS = {
    # create: only a new file; replace: create or truncate; append: create or append.
    "create": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "replace": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "append": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


def write_file(args: dict[str, Any], cap: int, checked: Checked | None = None) -> bytes:
    path = _str_arg(args, "path")
    content = _str_arg(args, "content")
    mode = _str_arg(args, "mode")
    _only(args, {"path", "content", "mode"})
    if mode not in _WRITE_FLAGS:
        raise ToolError("bad_request", "mode must be create, replace or append")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError("too_large", f"content is larger than {MAX_WRITE_BYTES} bytes")
    parent, name = open_parent(path)
    try:
        if checked is not None:
            checked.verify_parent(parent, path)
        # Non-blocking open: a FIFO without a reader fails instead of hanging.
        # O_TRUNC happens only after the type check below for existing files.
        flags = _WRITE_FLAGS[mode] & ~os.O_TRUNC
        if checked is not None and checked.created:
            # brokerd created the empty file itself (a file grant): open it as
            # it is; the identity check below makes sure it is that file.
            flags &= ~(os.O_CREAT | os.O_EXCL)
        fd = open_last(parent, name, flags | os.O_NONBLOCK)
        try:
            if checked is not None:
                checked.verify_target(fd)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError("not_a_file", "the path is not a regular file")
            os.set_blocking(fd, True)
            try:
                if _WRITE_FLAGS[mode] & os.O_TRUNC:
                    os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as exc:
                raise os_error(exc, "writing the file") from exc
        finally:
            os.close(fd)
    finally:
        os.close(parent)
    return encode_answer(ok({"bytes_written": len(data)}))


def _str_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError("bad_request", f"argument {key!r} must be a string")
    return value


def _only(args: dict[str, Any], keys: set[str]) -> None:
    extra = set(args) - keys
    if extra:
        raise ToolError("bad_request", f"unknown arguments: {', '.join(sorted(extra))}")
