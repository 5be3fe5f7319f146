"""brokerd's MCP tool sources on disk (12 "Configuration", "Pins"): files.

- `read_source_files` (`boxmaker._source_files`, shared with bxctl's offline
  checks): every `*.toml` of the sources directory.
- `load_sources`: `[tool_sources]` -> the `SourceState` (`proto.mcp`'s rules).
- `server_states`: each declared server with its pin, as the log's newest pin
  record (`PinLedger`) and `audit/pins/<digest>.json` say (`_pin_choice.choose_pins`: an
  edited or planted file, another digest, a changed declaration: unpinned,
  with the reason).
- `write_pin`: the pin file, durable before its `mcp_pin` record (a fresh
  temporary name with ``O_EXCL``, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._atomic_file import fsync_directory
from .._audit_files import pin_reader
from .._pin_choice import choose_pins
from .._source_files import read_source_files
from ..proto.mcp import (
    Pin,
    PinLedger,
    SourceSet,
    SourceState,
    ToolSourcesConfig,
    encode_pin,
    parse_source_files,
)
from .runner._mcp_runtime import McpServerState


def sources_directory(home: Path, config: ToolSourcesConfig) -> Path:
    return Path(config.dir) if config.dir.startswith("/") else home / config.dir


def load_sources(home: Path, config: ToolSourcesConfig, *,
                 runner_output_max: int) -> SourceState:
    files = read_source_files(sources_directory(home, config))
    return parse_source_files(files, runner_output_max=runner_output_max)


def server_states(sources: SourceSet, ledger: PinLedger,
                  audit_dir: Path) -> dict[str, McpServerState]:
    """Every declared server with its pin, or the reason it is unpinned."""
    checked = choose_pins(sources.servers, ledger, pin_reader(audit_dir))
    return {server_id: McpServerState(decl=decl, pin=checked[server_id].pin,
                                      unpinned=checked[server_id].reason)
            for server_id, decl in sources.servers.items()}


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
