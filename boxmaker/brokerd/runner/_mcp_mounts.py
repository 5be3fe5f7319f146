"""The mounts of one MCP call (12 "Mounts"): each `path`/`write_path` value, walked on the host.

Every non-null `path` or `write_path` value of the effective arguments (each
array item) gets the narrowest mount of the file tools (`plan_file_call`, the
same host walk from ``/`` with ``O_NOFOLLOW`` below the grant entry, the
ownership rule, protected roots by real path, identity and file-system
location, hard links by inode), at the same path:

- `path` as for `read_file`: the value itself, read-only (a target that does
  not exist: the deepest existing directory at or below the grant entry);
- `write_path` as for `write_file` replacing: an existing file read-write; a
  missing file its parent directory read-write when that parent is at or
  below the grant entry (under a file grant brokerd creates the empty file
  through the checked directory and mounts it, as for write_file).

The grant entry of a value is the longest entry of the winning grant's
`paths` constraint on that argument that holds it (the RunSpec's
`mcp_paths`).  Inside every directory mount the protected roots and the
`deny_paths` are masked.  Two values reaching the same destination share one
mount (read-write when either needs it) when it is the same object; anything
else at one destination (another object, a mask) is `UnsafeTarget`.  Each
plan's mount root goes into the identities `podman init` is checked against
(`_three_steps.check_mount_identities`).  Blocking I/O: run in a thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...proto._grammar import is_below
from ...proto.mcp import ToolGrammar, kinded_values
from ._host_walk import HostWalker, UnsafeTarget
from ._mounts import MaskSources, Mount, plan_file_call
from ._three_steps import MountIdentity


def grant_entry_of(value: str, entries: Sequence[str]) -> str | None:
    """The longest of `entries` at or above `value` (D3's match, D6's entry)."""
    holding = [entry for entry in entries if is_below(value, entry)]
    return max(holding, key=len) if holding else None


def plan_mcp_mounts(
    walker: HostWalker,
    grammar: ToolGrammar,
    effective: Mapping[str, Any],
    *,
    entries: Mapping[str, Sequence[str]],
    deny_paths: Sequence[str],
    masks: MaskSources,
) -> tuple[tuple[Mount, ...], tuple[MountIdentity, ...]]:
    """The mounts and the identities to check after init (see the module's docstring)."""
    mains: dict[str, Mount] = {}
    identities: dict[str, MountIdentity] = {}
    masked: dict[str, Mount] = {}
    for name, kind, value in kinded_values(grammar, effective):
        if kind not in ("path", "write_path"):
            continue
        entry = grant_entry_of(value, entries.get(name, ()))
        if entry is None:
            raise UnsafeTarget(f"{name} {value}: no entry of the winning grant holds it")
        plan = plan_file_call(
            walker, tool="write_file" if kind == "write_path" else "read_file", path=value,
            grant_path=entry, mode="replace" if kind == "write_path" else None,
            deny_paths=deny_paths, masks=masks)
        main, *inner = plan.mounts
        identity = MountIdentity(destination=plan.root, dev=plan.root_id[0],
                                 ino=plan.root_id[1])
        before = mains.get(main.destination)
        if before is not None:
            if before.source != main.source or identities[main.destination] != identity:
                raise UnsafeTarget(f"{value}: two arguments reach {main.destination} "
                                   "as different objects")
            main = Mount(source=main.source, destination=main.destination,
                         read_only=before.read_only and main.read_only)
        mains[main.destination] = main
        identities[main.destination] = identity
        for mask in inner:
            masked[mask.destination] = mask
    for destination in masked:
        if destination in mains:
            raise UnsafeTarget(f"{destination}: an argument names a path that is masked "
                               "inside another argument's mount")
    every = [*mains.values(), *masked.values()]
    # Parents first (podman sorts too): a mount inside another is made after it.
    every.sort(key=lambda m: (m.destination.count("/"), m.destination))
    return tuple(every), tuple(identities[d] for d in sorted(identities))
