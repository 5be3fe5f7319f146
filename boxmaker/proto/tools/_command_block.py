"""What an approval shows for a `run_command` call (12-tool-sources "The container"): pure.

argv one token per line, escaped, then `cwd`, each mount with ``ro`` or ``rw``,
and ``network: none``.  The rows are (field, escaped value) pairs, so that
bxctl's terminal block and the approval page lay them out as they lay out the
other fields; a token is shown as JSON (quoted) so that an empty token, a
trailing space or a quote in it is visible: ``["rm", "-rf", "a b"]`` is not
``["rm", "-rf", "a", "b"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._escape import escape_line
from ._args import ArgsError
from ._command_args import parse_run_command_args


def command_block_rows(
    argv: Sequence[str], cwd: str, mounts: Sequence[tuple[str, bool]]
) -> list[tuple[str, str]]:
    """``(field, value)`` rows: ``argv[0]``.., ``cwd``, ``mount`` (each ``path (ro|rw)``),
    ``network``.  `mounts`: the winning grant's `paths` with its `write`."""
    rows = [
        (f"argv[{at}]", escape_line(json.dumps(token, ensure_ascii=False)))
        for at, token in enumerate(argv)
    ]
    rows.append(("cwd", escape_line(cwd)))
    for path, write in mounts:
        rows.append(("mount", f"{escape_line(path)} ({'rw' if write else 'ro'})"))
    rows.append(("network", "none"))
    return rows


def command_approval_rows(args: Mapping[str, Any], grant: str,
                          mounts: Sequence[tuple[str, bool]] | None = None
                          ) -> list[tuple[str, str]] | None:
    """The rows an approval of a run_command call shows, in bxctl and on the approval
    page alike: `command_block_rows`, then `stdin` when given.  An approval carries
    no mounts (12's `source` is null for run_command): `mounts` are the ask grant's
    `paths` with its `write`, as whoever shows the approval read them from the grant
    files; without them the block names the grant whose paths they are.  None when
    `args` is not a valid run_command call (brokerd never asks for one; the caller
    shows the plain arguments)."""
    try:
        parsed = parse_run_command_args(args)
    except ArgsError:
        return None
    if mounts is not None:
        rows = command_block_rows(parsed.argv, parsed.cwd, mounts)
    else:
        rows = command_block_rows(parsed.argv, parsed.cwd, ())
        network = rows.pop()
        rows.append(("mounts", f"the paths of grant {escape_line(grant)}, "
                               "read-write only if it says write = true"))
        rows.append(network)
    if parsed.stdin is not None:
        rows.append(("stdin", escape_line(parsed.stdin)))
    return rows
