"""Taint: a session's confidentiality label and untrusted flag (03-policy)."""

from __future__ import annotations

from typing import Literal

import attrs

Label = Literal["public", "private", "secret"]
LABELS: tuple[Label, ...] = ("public", "private", "secret")
_RANK: dict[str, int] = {label: rank for rank, label in enumerate(LABELS)}


def label_rank(label: Label) -> int:
    """public < private < secret."""
    return _RANK[label]


def max_label(a: Label, b: Label) -> Label:
    return a if _RANK[a] >= _RANK[b] else b


@attrs.frozen(kw_only=True)
class Taint:
    """`{"label": L, "untrusted": bool}`; a new session is public and trusted."""

    label: Label
    untrusted: bool

    def raised_by(self, label: Label, untrusted: bool) -> Taint:
        """Taint only rises: the combination after a call that ran."""
        return Taint(label=max_label(self.label, label), untrusted=self.untrusted or untrusted)

    def is_lower_or_equal(self, other: Taint) -> bool:
        """True when `self` is nowhere above `other` (for declassify)."""
        return _RANK[self.label] <= _RANK[other.label] and (not self.untrusted or other.untrusted)


NEW_SESSION = Taint(label="public", untrusted=False)
FAIL_CLOSED = Taint(label="secret", untrusted=True)
"""What a session whose state cannot be read is treated as."""
