"""Re-deciding recorded calls (`bxctl grants replay`, 07-bxctl): pure, no I/O.

`Redecider` runs the judgement of the one `decide` of this package (`judge`,
D0..D8) for a recorded call at the taint of its decision record, with a grant
state and the protected paths; of the verdict it keeps the outcome, the grant
and the result taint (no reason is put into words).  `judge` is pure, so a call
with the same tool, arguments and taint always gets the same answer: a bounded
cache keyed by those (the arguments as their stored canonical text) saves the
work for the calls a history repeats.

`ReplayTally` counts the was -> now matrix and picks the changed calls: a call
changes when its outcome (`allowed`, `ask`, `denied:<code>`) changes; the
grant is shown beside it.  A change *widens* when a call that was denied or
asked would now be allowed (then `replay` exits 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

import attrs

from ..proto._escape import escape_line
from ..proto._json import dumps
from ..proto._taint import Label, Taint
from ..proto.audit import HistoryCall, scan_json
from ._decision import ProtectedPaths
from ._model import GrantState
from ._verdict import judge

CACHE_SIZE: Final = 65_536


class Redecided(NamedTuple):
    """The outcome a grant state gives a recorded call now.

    (A named tuple: one is made for each of a million calls.)"""

    outcome: str
    grant: str | None
    label: Label | None
    """D8's result label (None when no allow/ask grant applies)."""
    untrusted: bool | None
    matched: tuple[str, ...]


def _loads(text: str) -> Any:
    """`json.loads` for the stored text of arguments: the C scanner alone when the text is
    one JSON value from its first character to its last (as stored, canonical)."""
    try:
        value, end = scan_json(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError):
        pass  # json.loads says what is wrong
    return json.loads(text)


class Redecider:
    """`decide`'s verdict for recorded calls, with a bounded cache."""

    def __init__(self, grants: GrantState, protected: ProtectedPaths,
                 cache_size: int = CACHE_SIZE) -> None:
        self.grants = grants
        self.protected = protected
        self._cache: dict[tuple[str, str, str, bool], Redecided] = {}
        self._cache_size = cache_size

    def __call__(self, call: HistoryCall) -> Redecided:
        return self.decide(call.tool, call.args_text, call.state)

    def decide(self, tool: str, args_text: str, state: Taint) -> Redecided:
        """A call given as its tool, its arguments' stored text and its taint."""
        key = (tool, args_text, state.label, state.untrusted)
        cache = self._cache
        found = cache.get(key)
        if found is not None:
            return found
        verdict = judge(tool, _loads(args_text), state, self.grants, self.protected,
                        with_args=False)
        found = Redecided(verdict.outcome, verdict.grant, verdict.label, verdict.untrusted,
                          verdict.matched_ids)
        if len(cache) >= self._cache_size:
            cache.clear()
        cache[key] = found
        return found


@attrs.frozen(kw_only=True, slots=True)
class Change:
    call: HistoryCall
    now: Redecided

    @property
    def widens(self) -> bool:
        return widens(self.call.outcome, self.now.outcome)


def widens(was: str, now: str) -> bool:
    """Denied or asked before, allowed now."""
    return now == "allowed" and was != "allowed"


class ReplayTally:
    """The was -> now matrix and the count of widening changes; `on_change` is given
    each changed call, in order (what it returns is not looked at)."""

    def __init__(self, on_change: Callable[[Change], object] | None = None) -> None:
        self.calls = 0
        self.changes = 0
        self.widening = 0
        self.matrix: dict[str, dict[str, int]] = {}
        self._on_change = on_change

    def add(self, call: HistoryCall, now: Redecided) -> Change | None:
        self.calls += 1
        row = self.matrix.get(call.outcome)
        if row is None:
            row = self.matrix[call.outcome] = {}
        row[now.outcome] = row.get(now.outcome, 0) + 1
        if now.outcome == call.outcome:
            return None
        self.changes += 1
        change = Change(call=call, now=now)
        if change.widens:
            self.widening += 1
        if self._on_change is not None:
            self._on_change(change)
        return change

    def merge(self, other: ReplayTally, changes: Iterable[Change] = ()) -> None:
        """Add the counts of a tally of later calls (a batch replayed elsewhere) and hand
        on its changed calls (what its `add` returned, in order)."""
        if self._on_change is not None:
            for change in changes:
                self._on_change(change)
        self.calls += other.calls
        self.changes += other.changes
        self.widening += other.widening
        for was, row in other.matrix.items():
            mine = self.matrix.get(was)
            if mine is None:
                mine = self.matrix[was] = {}
            for now, count in row.items():
                mine[now] = mine.get(now, 0) + count

    def matrix_json(self) -> dict[str, dict[str, int]]:
        """Sorted by outcome, for a stable document."""
        return {was: dict(sorted(row.items())) for was, row in sorted(self.matrix.items())}

    def matrix_lines(self) -> list[str]:
        rows = [(was, now, count) for was, row in self.matrix_json().items()
                for now, count in row.items()]
        width = max((len(was) for was, _, _ in rows), default=0)
        return [f"  {was:<{width}} -> {now}: {count}" for was, now, count in rows]


def change_json(change: Change) -> dict[str, Any]:
    """One entry of `changes` (07-bxctl): the arguments as stored."""
    call = change.call
    return {
        "call": call.seq,
        "ts": call.ts,
        "session": call.session,
        "tool": call.tool,
        "args": call.args(),
        "was": {"outcome": call.outcome, "grant": call.grant},
        "now": {"outcome": change.now.outcome, "grant": change.now.grant},
    }


def _side(outcome: str, grant: str | None) -> str:
    return outcome if grant is None else f"{outcome} ({grant})"


def call_words(call: HistoryCall) -> str:
    """`call SEQ TS SESSION TOOL ARGS`, every part escaped (one line).

    The arguments are shown as JSON with their text as text, so that what the
    model wrote is seen, with every hidden code point escaped (07-bxctl)."""
    return (f"call {call.seq} {call.ts} {escape_line(call.session)} {escape_line(call.tool)} "
            f"{shown_json(call.args())}")


def shown_json(value: Any) -> str:
    """JSON for a person: strings escaped as 07-bxctl says (so ESC is ``\\u{001B}``, a
    newline ``\\n``, a backslash ``\\\\``), a quote as ``\\"``; one line."""
    if isinstance(value, str):
        return '"' + escape_line(value).replace('"', '\\"') + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{shown_json(k)}:{shown_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(shown_json(item) for item in value) + "]"
    return dumps(value)


def change_line(change: Change) -> str:
    """One escaped line for a person."""
    call = change.call
    mark = "WIDENS" if change.widens else "changed"
    return (f"{mark}: {call_words(call)}: "
            f"{escape_line(_side(call.outcome, call.grant))} -> "
            f"{escape_line(_side(change.now.outcome, change.now.grant))}")
