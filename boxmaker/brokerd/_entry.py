"""The `brokerd` program's entry point: its imports made with the cyclic GC off.

Importing brokerd's modules makes some 85,000 objects and hardly any garbage,
and the collector's passes over them while they are made were a fifth of the
imports' time (issue 23 goal 3).  The garbage they made is then collected in one
pass, what is alive frozen (left out of later passes, as
`_context.keep_out_of_collections` does with the grant set), and the collector
turned on again before the command runs.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        from ._cli import main as cli_main
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()
    cli_main()
