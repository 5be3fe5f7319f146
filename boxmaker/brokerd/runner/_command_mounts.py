"""The host side of a `run_command` call's mounts (12-tool-sources "The container").

`plan_command_call` walks each entry of the winning grant's `paths` as a
mount root with the file tools' `HostWalker` (links above the entry are the
owner's, none below it; the ownership rule; protected roots by real path,
identity and file-system location), then `cwd` below its entry (it must be an
existing directory reached without a symbolic link: podman would otherwise
create it), and plans:

- each entry whole, at the same path, read-only unless the grant has
  `write = true`, not ``noexec`` (`command_mounts`);
- inside each, the masks of `_mounts.py`: every protected root and every
  path of `deny_paths` (the `deny` grants of read_file and list_dir, and with
  `write = true` of write_file too: `GrantSet.deny_paths["write_file"]`).

The plan carries every mount root's ``(st_dev, st_ino)``: after ``podman
init`` brokerd compares them below ``/proc/<pid>/root`` before the program
starts.  Raises `UnsafeTarget`.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Sequence

import attrs

from ._command_argv import command_mounts
from ._host_walk import HostWalker, UnsafeTarget, Walked, sticky_shared
from ._mounts import IMAGE_SYSTEM_DIRS, MaskSources, Mount, _is_below, _masks, _no_comma


@attrs.frozen(kw_only=True)
class CommandPlan:
    """The mounts of one run_command call and what `init` must find inside."""

    mounts: tuple[Mount, ...]
    roots: tuple[tuple[str, tuple[int, int]], ...]
    """(destination, (st_dev, st_ino)) of each mount root, in `paths` order."""
    cwd_id: tuple[int, int]


def _open_root(walker: HostWalker, entry: str) -> Walked:
    parent, last = posixpath.split(entry)
    above = walker.walk(parent, follow=True, spelled=entry, tail=[last])
    try:
        if above.rest or not stat.S_ISDIR(above.st.st_mode):
            raise UnsafeTarget(f"{entry}: the grant entry cannot be opened (not a directory)")
        root = walker.walk(last, above, follow=False, spelled=entry)
    finally:
        above.close()
    if root.rest or not stat.S_ISDIR(root.st.st_mode):
        root.close()
        raise UnsafeTarget(f"{entry}: the grant entry is not an existing directory")
    return root


def plan_command_call(
    walker: HostWalker,
    *,
    paths: Sequence[str],
    entry: str,
    cwd: str,
    write: bool,
    deny_paths: Sequence[str],
    masks: MaskSources,
) -> CommandPlan:
    """The mounts for one run_command call, after the host walk (see above)."""
    if entry not in paths or not _is_below(cwd, entry):
        raise UnsafeTarget("cwd is not at or below the winning grant's entry")
    for path in paths:
        if not path.startswith("/") or path == "/":
            raise UnsafeTarget("a grant entry is not an absolute path below /")
        if write and any(_is_below(path, d) or _is_below(d, path) for d in IMAGE_SYSTEM_DIRS):
            raise UnsafeTarget(
                f"{path}: a writable grant over the image's system directories is never mounted"
            )
        _no_comma(path, "a grant entry")
    walker.check_roots()
    sources: list[tuple[str, str]] = []
    roots: list[tuple[str, tuple[int, int]]] = []
    mask_mounts: list[Mount] = []
    cwd_id: tuple[int, int] | None = None
    for path in paths:
        root = _open_root(walker, path)
        try:
            if sticky_shared(root.st):
                raise UnsafeTarget(f"{path}: a shared sticky directory is never mounted")
            _no_comma(root.real, "the real path")
            inside = walker.locate(path, root.real, root.st)
            sources.append((path, root.real))
            roots.append((path, (root.st.st_dev, root.st.st_ino)))
            mask_mounts += _masks(walker.protected, root.real, path, deny_paths, masks, inside)
            if path == entry:
                cwd_id = _walk_cwd(walker, root, entry, cwd)
        finally:
            root.close()
    assert cwd_id is not None
    mounts = command_mounts(sources, write=write, masks=mask_mounts)
    return CommandPlan(mounts=tuple(mounts), roots=tuple(roots), cwd_id=cwd_id)


def _walk_cwd(walker: HostWalker, root: Walked, entry: str, cwd: str) -> tuple[int, int]:
    below = walker.walk(cwd[len(entry) :], root, follow=False, spelled=cwd)
    try:
        if below.rest or not stat.S_ISDIR(below.st.st_mode):
            raise UnsafeTarget(f"{cwd}: cwd is not an existing directory")
        walker.locate(cwd, below.real, below.st)
        return (below.st.st_dev, below.st.st_ino)
    finally:
        below.close()
