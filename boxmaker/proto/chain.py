"""The chain verifier (04-audit): fed line by line, produces the ChainReport."""

from __future__ import annotations

from ._verify import (
    AcceptedBreak,
    ChainReport,
    ChainVerifier,
    Failure,
    Head,
    Recovered,
    TornTail,
)

__all__ = [
    "AcceptedBreak",
    "ChainReport",
    "ChainVerifier",
    "Failure",
    "Head",
    "Recovered",
    "TornTail",
]
