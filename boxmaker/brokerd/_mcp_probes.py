"""The probes brokerd holds for a pin (12-tool-sources "Pinning"): trio's clock only.

A probe is held under a random u64 for 10 minutes and is good for one pin:
`take` removes it whatever it then finds (a wrong digest or `invalidates` uses
it up too; only a refused passkey gives it back, `give_back`, so the owner can
sign and send it again), so an `mcp_pin` replayed with the same probe id finds
nothing, and an assertion over one probe's challenge cannot pin another.

A probe also keeps the `mcp_probe` answer bxctl showed (`show`), and the one-time
links of the approval page's pin page (`link`): a link names its probe and lives
as long as the probe is held, so a pin made (or the probe expired) ends it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Final

import attrs
import trio

from ..proto.mcp import Pin
from ..proto.wire import McpProbeAnswer

PROBE_HELD_S: Final = 600.0
MAX_HELD: Final = 64
"""At most this many probes at once (the oldest is dropped): the owner's probes are few."""
MAX_LINKS: Final = 16
"""Pin links outstanding at once; the oldest goes first."""


@attrs.frozen(kw_only=True)
class HeldProbe:
    server: str
    pin: Pin
    """What the live list would be pinned as (its `pinned_at` and `by` are the probe's)."""
    invalidates: tuple[tuple[str, str | None], ...]
    expires: float
    shown: McpProbeAnswer | None = None
    """The `mcp_probe` answer, as bxctl showed it (the pin page shows it again)."""


class ProbeTable:
    def __init__(self, clock: Callable[[], float] = trio.current_time) -> None:
        self.clock = clock
        self._held: dict[int, HeldProbe] = {}
        self._links: dict[str, int] = {}

    def new_id(self) -> int:
        while True:
            probe_id = secrets.randbits(64)
            if probe_id not in self._held:
                return probe_id

    def hold(self, probe_id: int, server: str, pin: Pin,
             invalidates: tuple[tuple[str, str | None], ...]) -> None:
        now = self.clock()
        for key in [k for k, v in self._held.items() if v.expires <= now]:
            del self._held[key]
        while len(self._held) >= MAX_HELD:
            del self._held[next(iter(self._held))]
        self._held[probe_id] = HeldProbe(server=server, pin=pin, invalidates=invalidates,
                                         expires=now + PROBE_HELD_S)

    def take(self, probe_id: int) -> HeldProbe | None:
        """The probe, removed; None when unknown, used or expired."""
        held = self._held.pop(probe_id, None)
        if held is None or held.expires <= self.clock():
            return None
        return held

    def give_back(self, probe_id: int, held: HeldProbe) -> None:
        """A probe taken by a pin whose passkey was refused: held again, to its expiry."""
        self._held[probe_id] = held

    def show(self, answer: McpProbeAnswer) -> None:
        """Keep the answer of a probe just held, for its pin page."""
        held = self._held.get(answer.probe_id)
        if held is not None:
            self._held[answer.probe_id] = attrs.evolve(held, shown=answer)

    def peek(self, probe_id: int) -> HeldProbe | None:
        """The probe, left held; None when unknown, used or expired."""
        held = self._held.get(probe_id)
        if held is None or held.expires <= self.clock():
            return None
        return held

    def link(self, probe_id: int) -> str:
        """A new one-time link's token for a held probe (64 hex digits)."""
        live = {t: p for t, p in self._links.items() if self.peek(p) is not None}
        while len(live) >= MAX_LINKS:
            del live[next(iter(live))]
        token = secrets.token_hex(32)
        live[token] = probe_id
        self._links = live
        return token

    def linked(self, token: str) -> tuple[int, HeldProbe] | None:
        """The probe a link names, while it is held; None otherwise."""
        probe_id = self._links.get(token)
        held = None if probe_id is None else self.peek(probe_id)
        if probe_id is None or held is None:
            self._links.pop(token, None)
            return None
        return probe_id, held
