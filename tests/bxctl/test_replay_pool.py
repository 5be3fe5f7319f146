"""Re-deciding on a second core (boxmaker/bxctl/_replay_pool.py): when it is used.

That a real forked worker, fed the verified lines of a real log, tallies exactly
what the in-process Redecider tallies is tested through `_replay_log` in
tests/bxctl/test_replay_cmd.py (test_serial_and_pool_replay_alike) and through the
command in tests/bxctl/test_grants_history_cmd.py."""

from __future__ import annotations

import os

from boxmaker.bxctl._replay_pool import PARALLEL_MIN_BYTES, parallel_worth_it


def test_parallel_only_for_big_logs() -> None:
    assert not parallel_worth_it(PARALLEL_MIN_BYTES - 1)
    assert parallel_worth_it(PARALLEL_MIN_BYTES) == ((os.cpu_count() or 1) > 1)
