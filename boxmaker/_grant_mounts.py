"""The mounts of a run_command approval, read from the owner's grant files.

An approval carries no mounts (12-tool-sources: `source` is null for
run_command); its block shows them "from args and the grant".  bxctl reads
the grant set from its configured grants directory, as `bxctl grants check`
does, and answers the ask grant's `paths` with its `write`: each path is one
mount of the call's container, read-write only with `write = true`.  None when
the set cannot be read, is invalid, or has no such run_command grant (then the
block names the grant instead).  The grants may have changed since brokerd
asked; brokerd decides the call again when it is approved (03-policy).
"""

from __future__ import annotations

from pathlib import Path

from .policy._commands import CommandGrant
from .policy._load import GrantsWatcher
from .policy._model import GrantSet

_WATCHERS: dict[Path, GrantsWatcher] = {}
"""One watcher per directory for this process: a chat that shows many approvals
reads the set again only when its files changed."""


def command_mounts(grants_dir: Path, grant_id: str) -> list[tuple[str, bool]] | None:
    """``(path, write)`` per `paths` entry of the run_command grant `grant_id`."""
    watcher = _WATCHERS.setdefault(grants_dir, GrantsWatcher(grants_dir))
    try:
        state, _ = watcher.refresh()
    except OSError:
        return None
    if not isinstance(state, GrantSet):
        return None
    grant = state.get(grant_id)
    command = None if grant is None else grant.command
    if not isinstance(command, CommandGrant) or not command.paths:
        return None
    return [(path, command.write) for path in command.paths]
