"""The MCP tool sources on disk, read the same way by brokerd and by bxctl's
offline checks (12-tool-sources "Configuration", "Pins").

- `read_source_files`: every `*.toml` of the sources directory (a missing
  directory is no servers), each a regular file read through its fd, at
  most `MAX_SOURCE_FILES` files of `MAX_SOURCE_BYTES`; an unreadable or
  oversize file is a `SourceFile` with its error (S1 says so).
- `read_sources`: the directory's `SourceState` (an unlistable directory is an
  invalid set with one S1 problem, as brokerd reports it).
- `offline_view`: each server's pin chosen as brokerd chooses it
  (`_pin_choice`): the newest `mcp_pin` / `mcp_server drifted` record of the
  log after the last accepted break, whose `audit/pins/<digest>.json` must
  exist, decode and recompute, with the current declaration's `source`; else
  unpinned with brokerd's reason.  A newer pin file no record names is no pin.
- `offline_registry`: the tool registry `decide` and the dormant grants take.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ._audit_files import iter_lines, list_log_files, pins_reader
from ._pin_choice import choose_pins, ledger_of_lines
from .policy._mcp_verdict import McpRegistry, RegisteredServer
from .proto.mcp import (
    InvalidSourceSet,
    Pin,
    PinCheck,
    PinLedger,
    SourceFile,
    SourceProblem,
    SourceSet,
    SourcesReport,
    SourceState,
    parse_source_files,
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


def read_pin_ledger(audit_dir: Path) -> PinLedger:
    """The pin ledger of the log's day files, as brokerd folds it at start
    (`_pin_choice`); a missing audit directory is an empty ledger.  Raises OSError."""
    try:
        files = list_log_files(audit_dir)
    except FileNotFoundError:
        return PinLedger()
    return ledger_of_lines(line for log_file in files if log_file.day_file
                           for line, _ in iter_lines(log_file.path))


def offline_view(sources_dir: Path, audit_dir: Path, *, runner_output_max: int,
                 pins_dir: Path | None = None
                 ) -> tuple[SourceState, dict[str, PinCheck], McpRegistry]:
    """The source set, each declared server's pin check and the registry, from the
    sources directory and the audit directory (its log and `pins/`, or `pins_dir`).
    Raises OSError when the log cannot be read."""
    sources = read_sources(sources_dir, runner_output_max=runner_output_max)
    if not isinstance(sources, SourceSet):
        return sources, {}, offline_registry(sources, {})
    read = pins_reader(pins_dir if pins_dir is not None else pins_directory(audit_dir))
    checks = choose_pins(sources.servers, read_pin_ledger(audit_dir), read)
    return sources, checks, offline_registry(sources, checks)


def offline_registry(sources: SourceState, checks: Mapping[str, PinCheck]) -> McpRegistry:
    """The registry as brokerd would build it: each declared server pinned by the
    newest pin record's file when it holds, else unpinned with the reason."""
    report = sources.report
    if not isinstance(sources, SourceSet):
        return McpRegistry(valid=False, digest=report.digest, servers={})
    servers: dict[str, RegisteredServer] = {}
    for server_id, decl in sources.servers.items():
        check = checks.get(server_id, PinCheck(pin=None, reason="none"))
        pin = check.pin
        servers[server_id] = RegisteredServer(
            decl=decl, pin=pin.digest if pin is not None else None,
            unpinned=check.reason if pin is None else None,
            verdicts=tool_verdicts(decl, pin) if pin is not None else {})
    return McpRegistry(valid=True, digest=report.digest, servers=servers)


def offline_pin(checks: Mapping[str, PinCheck], server: str) -> Pin | None:
    """The pin `offline_view` found holding for `server` (None: unpinned)."""
    check = checks.get(server)
    return check.pin if check is not None else None
