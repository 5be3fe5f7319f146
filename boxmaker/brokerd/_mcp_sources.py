"""brokerd's MCP tool sources on disk (12 "Configuration", "Pins"): files.

- `read_source_files`: every `*.toml` of the sources directory (a missing
  directory is no servers), each a regular file read through its fd, at
  most `MAX_SOURCE_FILES` files of `MAX_SOURCE_BYTES`; an unreadable or
  oversize file is a `SourceFile` with its error (S1 says so).
- `load_sources`: `[tool_sources]` -> the `SourceState` (`proto.mcp`'s rules).
- `server_states`: each declared server with its pin, as the log's newest pin
  record (`PinLedger`) and `audit/pins/<digest>.json` say (`check_pin`: an
  edited or planted file, another digest, a changed declaration: unpinned,
  with the reason).
- `write_pin`: the pin file, durable before its `mcp_pin` record (a fresh
  temporary name with ``O_EXCL``, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from .._atomic_file import fsync_directory
from .._audit_files import pin_reader
from ..proto.mcp import (
    Pin,
    PinLedger,
    SourceFile,
    SourceSet,
    SourceState,
    ToolSourcesConfig,
    encode_pin,
    parse_source_files,
    pin_source,
)
from .runner._mcp_runtime import McpServerState

MAX_SOURCE_FILES: Final = 256
MAX_SOURCE_BYTES: Final = 1024 * 1024


def sources_directory(home: Path, config: ToolSourcesConfig) -> Path:
    return Path(config.dir) if config.dir.startswith("/") else home / config.dir


def _read_one(directory: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                 dir_fd=directory)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{name} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SOURCE_BYTES:
        raise OSError(f"{name} is larger than {MAX_SOURCE_BYTES} bytes")
    return data


def read_source_files(directory: Path) -> list[SourceFile]:
    """The `*.toml` entries of `directory`, sorted by name bytes; [] when it is missing.
    Raises OSError when the directory cannot be listed, or holds too many files."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        names = sorted((n for n in os.listdir(fd) if n.endswith(".toml")),
                       key=os.fsencode)
        if len(names) > MAX_SOURCE_FILES:
            raise OSError(f"{directory}: more than {MAX_SOURCE_FILES} *.toml files")
        out: list[SourceFile] = []
        for name in names:
            try:
                content, error = _read_one(fd, name), None
            except OSError as exc:
                content, error = b"", exc.strerror or str(exc)
            out.append(SourceFile(name=name, name_bytes=os.fsencode(name), content=content,
                                  error=error))
        return out
    finally:
        os.close(fd)


def load_sources(home: Path, config: ToolSourcesConfig, *,
                 runner_output_max: int) -> SourceState:
    files = read_source_files(sources_directory(home, config))
    return parse_source_files(files, runner_output_max=runner_output_max)


def server_states(sources: SourceSet, ledger: PinLedger,
                  audit_dir: Path) -> dict[str, McpServerState]:
    """Every declared server with its pin, or the reason it is unpinned."""
    read = pin_reader(audit_dir)
    out: dict[str, McpServerState] = {}
    for server_id, decl in sources.servers.items():
        newest = ledger.newest(server_id)
        data = read(newest.digest) if newest is not None and newest.digest is not None else None
        checked = ledger.check(server_id, file=data, current=pin_source(decl))
        out[server_id] = McpServerState(decl=decl, pin=checked.pin, unpinned=checked.reason)
    return out


def write_pin(audit_dir: Path, pin: Pin) -> Path:
    """`audit/pins/<digest>.json`, durable.  Raises OSError."""
    pins = audit_dir / "pins"
    pins.mkdir(mode=0o700, exist_ok=True)
    path = pins / pin.file_name
    data = encode_pin(pin)
    temporary = pins / f".{pin.file_name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    fsync_directory(pins)
    return path
