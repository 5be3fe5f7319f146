"""Re-deciding on a second core (boxmaker/bxctl/_replay_pool.py): a real forked
worker gives, in the order the calls were fed, exactly what the in-process
Redecider gives."""

from __future__ import annotations

import random

import pytest

from boxmaker.bxctl import _replay_pool
from boxmaker.bxctl._replay_pool import PARALLEL_MIN_BYTES, DecidePool, parallel_worth_it
from boxmaker.policy._decision import ProtectedPaths
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantSet
from boxmaker.policy._replay import Redecided, Redecider
from boxmaker.proto._history import HistoryCall
from boxmaker.proto._json import dumps
from boxmaker.proto._taint import LABELS, Taint

GRANTS = """
[[grant]]
id = "docs"
tool = "read_file"
mode = "allow"
paths = ["/srv/docs"]
label = "private"
untrusted = false
max_label = "private"

[[grant]]
id = "ask-web"
tool = "http_fetch"
mode = "ask"
hosts = ["*.example.org"]
label = "public"
untrusted = true
max_label = "secret"
"""
PROTECTED = ProtectedPaths.of(["/var/lib/boxmaker"])


def calls(count: int, seed: int) -> list[HistoryCall]:
    rng = random.Random(seed)
    out = []
    for seq in range(count):
        if rng.random() < 0.5:
            tool = "read_file"
            args = {"path": rng.choice(["/srv/docs/a", "/srv/docs/b/c", "/etc/x",
                                        "/var/lib/boxmaker/k", "relative"])}
        else:
            tool = "http_fetch"
            args = {"url": rng.choice(["https://a.example.org/", "https://evil.test/",
                                       "http://a.example.org/x"])}
        state = Taint(label=rng.choice(LABELS), untrusted=rng.random() < 0.3)
        out.append(HistoryCall(seq=seq, ts="2026-12-01T10:00:00.000000Z", session="s-1",
                               tool=tool, args_text=dumps(args), outcome="allowed", grant=None,
                               state=state))
    return out


def grant_set() -> GrantSet:
    state = parse_grant_texts({"g.toml": GRANTS})
    assert isinstance(state, GrantSet), state
    return state


@pytest.mark.parametrize(("count", "batch"), [(0, 4), (1, 4), (103, 7), (64, 4)])
def test_the_pool_answers_what_the_redecider_answers_in_order(
        monkeypatch: pytest.MonkeyPatch, count: int, batch: int) -> None:
    monkeypatch.setattr(_replay_pool, "BATCH", batch)
    history = calls(count, seed=count)
    got: list[tuple[HistoryCall, Redecided]] = []
    pool = DecidePool(grant_set(), PROTECTED, lambda c, r: got.append((c, r)))
    try:
        for call in history:
            pool(call)
        pool.finish()
    finally:
        pool.close()
    expected = Redecider(grant_set(), PROTECTED)
    assert [c for c, _ in got] == history
    assert [r for _, r in got] == [expected(c) for c in history]
    assert {r.outcome for _, r in got} >= ({"allowed"} if count > 50 else set())


def test_parallel_only_for_big_logs() -> None:
    assert not parallel_worth_it(PARALLEL_MIN_BYTES - 1)
    import os

    assert parallel_worth_it(PARALLEL_MIN_BYTES) == ((os.cpu_count() or 1) > 1)
