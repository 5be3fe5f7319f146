"""The MCP tool sources on disk, read the same way by brokerd and by bxctl's
offline checks (12-tool-sources "Configuration", "Pins").

- `read_source_files`: every `*.toml` of the sources directory (a missing
  directory is no servers), each a regular file read through its fd, at
  most `MAX_SOURCE_FILES` files of `MAX_SOURCE_BYTES`; an unreadable or
  oversize file is a `SourceFile` with its error (S1 says so).
- `read_sources`: the directory's `SourceState` (an unlistable directory is an
  invalid set with one S1 problem, as brokerd reports it).
- `offline_pins`: bxctl has no log, so a server's pin is a file of
  `audit/pins/` whose digest recomputes (`decode_pin`), named for its digest,
  for that server, with the current declaration's `source`; of several, the
  newest `pinned_at` (docs/decisions.md).
- `offline_registry`: the tool registry `decide` and the dormant grants take.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from ._audit_files import PIN_FILE_MAX
from .policy._mcp_verdict import McpRegistry, RegisteredServer
from .proto.mcp import (
    InvalidSourceSet,
    Pin,
    PinFileError,
    SourceFile,
    SourceProblem,
    SourceSet,
    SourcesReport,
    SourceState,
    decode_pin,
    parse_source_files,
    pin_source,
    sources_digest,
    tool_verdicts,
)

MAX_SOURCE_FILES: Final = 256
MAX_SOURCE_BYTES: Final = 1024 * 1024


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


def pins_directory(audit_dir: Path) -> Path:
    """brokerd's `audit/pins/`."""
    return audit_dir / "pins"


def read_sources(directory: Path, *, runner_output_max: int) -> SourceState:
    """The source set of `directory` (missing: no servers)."""
    try:
        files = read_source_files(directory)
    except OSError as exc:
        return InvalidSourceSet(report=SourcesReport(
            ok=False, count=0, digest=sources_digest(()),
            problems=(SourceProblem(file=".", index=None, server=None, rule="S1",
                                    message=f"the sources directory cannot be read "
                                            f"({exc.strerror or exc})"),)))
    return parse_source_files(files, runner_output_max=runner_output_max)


def _pin_bytes(directory: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=directory)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(PIN_FILE_MAX + 1)
    finally:
        os.close(fd)
    return None if len(data) > PIN_FILE_MAX else data


def read_pin_files(pins_dir: Path) -> list[Pin]:
    """Every pin of `pins_dir` (brokerd's `audit/pins/`) that decodes, whose digest
    recomputes and whose file is named for it; the others are left out (they are
    nobody's pin).  A missing directory is no pins."""
    try:
        fd = os.open(pins_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                     | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        out: list[Pin] = []
        for name in sorted(os.listdir(fd)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            data = _pin_bytes(fd, name)
            if data is None:
                continue
            try:
                pin = decode_pin(data)
            except PinFileError:
                continue
            if pin.file_name == name:
                out.append(pin)
        return out
    finally:
        os.close(fd)


def offline_view(sources_dir: Path, pins_dir: Path, *, runner_output_max: int
                 ) -> tuple[SourceState, list[Pin], McpRegistry]:
    """The source set, the pins and the registry of two directories."""
    sources = read_sources(sources_dir, runner_output_max=runner_output_max)
    pins = read_pin_files(pins_dir)
    return sources, pins, offline_registry(sources, pins)


def offline_registry(sources: SourceState, pins: list[Pin]) -> McpRegistry:
    """The registry as bxctl sees it offline: each declared server pinned by its newest
    fitting pin file, else unpinned (`none`, or `declaration_changed` when only pins of
    another declaration exist)."""
    report = sources.report
    if not isinstance(sources, SourceSet):
        return McpRegistry(valid=False, digest=report.digest, servers={})
    servers: dict[str, RegisteredServer] = {}
    for server_id, decl in sources.servers.items():
        own = [pin for pin in pins if pin.server == server_id]
        current = pin_source(decl)
        fitting = sorted((pin for pin in own if pin.source == current),
                         key=lambda pin: (pin.pinned_at, pin.digest))
        if fitting:
            pin = fitting[-1]
            servers[server_id] = RegisteredServer(decl=decl, pin=pin.digest, unpinned=None,
                                                  verdicts=tool_verdicts(decl, pin))
        else:
            servers[server_id] = RegisteredServer(
                decl=decl, pin=None, unpinned="declaration_changed" if own else "none")
    return McpRegistry(valid=True, digest=report.digest, servers=servers)


def offline_pin(pins: list[Pin], registry: McpRegistry, server: str) -> Pin | None:
    """The pin file `offline_registry` chose for `server` (None: unpinned)."""
    one = registry.servers.get(server)
    if one is None or one.pin is None:
        return None
    return next((pin for pin in pins if pin.digest == one.pin), None)
