"""brokerd.toml's `[commands]` table (12-tool-sources "Configuration"): pure.

The table is optional: without it a `run_command` call a grant allows is
answered `runner_unavailable` (runbook ``#commands-unconfigured``), and
nothing else changes.  `commands_problem` says what is wrong with a table as
written (the loader raises it as its ConfigError), `resolve_commands` turns
a valid one into `CommandsSettings`.

- `image`: the commands image by id only (``sha256:`` and 64 hex digits);
- `path`: PATH inside the container, 1..16 entries separated by ``:``, each
  of the path grammar (absolute; no empty entry, which would mean cwd);
- `memory`, `tmp`: podman sizes (``512m``); `pids` 1..1048576; `cpus`
  0.01..1024; `timeout_ms` 1..3600000; `output_max_bytes` 4096..the bound of
  `[runner] output_max_bytes` (the largest answer that fits one frame).
"""

from __future__ import annotations

import math
import re
from typing import Final

import attrs

from .proto._grammar import path_problem

MAX_PATH_ENTRIES: Final = 16
TIMEOUT_MS_MAX: Final = 3_600_000
MIN_OUTPUT_MAX_BYTES: Final = 4096
PIDS_MAX: Final = 1 << 20
_IMAGE: Final = re.compile(r"sha256:[0-9a-f]{64}")
_SIZE: Final = re.compile(r"[1-9][0-9]{0,12}[bkmg]?")


@attrs.frozen(kw_only=True)
class CommandsTable:
    """`[commands]` exactly as written (every key but `image` optional)."""

    image: str
    path: str = "/usr/local/bin:/usr/bin:/bin"
    memory: str = "512m"
    pids: int = 256
    cpus: float = 1.0
    tmp: str = "256m"
    timeout_ms: int = 120_000
    output_max_bytes: int = 1_048_576


@attrs.frozen(kw_only=True)
class CommandsSettings:
    """A valid `[commands]` table."""

    image: str
    path: tuple[str, ...]
    memory: str
    pids: int
    cpus: float
    tmp: str
    timeout_ms: int
    output_max_bytes: int

    @property
    def path_env(self) -> str:
        """The value of ``PATH`` inside the container."""
        return ":".join(self.path)


def commands_problem(table: CommandsTable, *, output_bound: int) -> str | None:
    """Why `table` is not valid (one message, naming the key), or None.

    `output_bound`: the largest `[runner] output_max_bytes` brokerd accepts."""
    if _IMAGE.fullmatch(table.image) is None:
        return "commands.image: name the commands image by id (sha256: and 64 hex digits), " \
            "never by tag"
    entries = table.path.split(":")
    if not 1 <= len(entries) <= MAX_PATH_ENTRIES:
        return f"commands.path: 1 to {MAX_PATH_ENTRIES} entries, not {len(entries)}"
    for at, entry in enumerate(entries):
        if entry == "":
            return f"commands.path: entry {at} is empty (an empty entry would mean the cwd)"
        problem = path_problem(entry)
        if problem is not None:
            return f"commands.path: entry {at}: {problem}"
    for name in ("memory", "tmp"):
        if _SIZE.fullmatch(getattr(table, name)) is None:
            return f"commands.{name}: {getattr(table, name)!r} is not a size like 512m"
    checks = (
        ("pids", table.pids, 1, PIDS_MAX),
        ("timeout_ms", table.timeout_ms, 1, TIMEOUT_MS_MAX),
        ("output_max_bytes", table.output_max_bytes, MIN_OUTPUT_MAX_BYTES, output_bound),
    )
    for name, value, low, high in checks:
        if not low <= value <= high:
            return f"commands.{name}: {value} is outside {low}..{high}"
    if not math.isfinite(table.cpus) or not 0.01 <= table.cpus <= 1024:
        return f"commands.cpus: {table.cpus} is outside 0.01..1024"
    return None


def resolve_commands(table: CommandsTable) -> CommandsSettings:
    """A table `commands_problem` found nothing wrong with, as settings."""
    return CommandsSettings(
        image=table.image,
        path=tuple(table.path.split(":")),
        memory=table.memory,
        pids=table.pids,
        cpus=float(table.cpus),
        tmp=table.tmp,
        timeout_ms=table.timeout_ms,
        output_max_bytes=table.output_max_bytes,
    )
