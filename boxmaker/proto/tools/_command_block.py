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
from collections.abc import Sequence

from .._escape import escape_line


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
