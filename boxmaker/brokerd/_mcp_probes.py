"""The probes brokerd holds for a pin (12-tool-sources "Pinning"): trio's clock only.

A probe is held under a random u64 for 10 minutes and is good for one pin:
`take` removes it whatever it then finds (a wrong digest or `invalidates` uses
it up too; only a refused passkey gives it back, `give_back`, so the owner can
sign and send it again), so an `mcp_pin` replayed with the same probe id finds
nothing, and an assertion over one probe's challenge cannot pin another.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Final

import attrs
import trio

from ..proto.mcp import Pin

PROBE_HELD_S: Final = 600.0
MAX_HELD: Final = 64
"""At most this many probes at once (the oldest is dropped): the owner's probes are few."""


@attrs.frozen(kw_only=True)
class HeldProbe:
    server: str
    pin: Pin
    """What the live list would be pinned as (its `pinned_at` and `by` are the probe's)."""
    invalidates: tuple[tuple[str, str | None], ...]
    expires: float


class ProbeTable:
    def __init__(self, clock: Callable[[], float] = trio.current_time) -> None:
        self.clock = clock
        self._held: dict[int, HeldProbe] = {}

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
