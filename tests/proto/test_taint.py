"""Taint (boxmaker/proto/_taint.py): the label order is a lattice and taint only rises."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from boxmaker.proto._taint import (
    FAIL_CLOSED,
    LABELS,
    NEW_SESSION,
    Taint,
    label_rank,
    max_label,
)

labels = st.sampled_from(LABELS)
taints = st.builds(Taint, label=labels, untrusted=st.booleans())


def test_the_order() -> None:
    assert [label_rank(label) for label in ("public", "private", "secret")] == [0, 1, 2]
    assert max_label("public", "secret") == "secret" == max_label("secret", "private")


@given(a=labels, b=labels, c=labels)
def test_max_label_is_a_join(a: str, b: str, c: str) -> None:
    assert max_label(a, b) == max_label(b, a)  # type: ignore[arg-type]
    assert max_label(a, max_label(b, c)) == max_label(max_label(a, b), c)  # type: ignore[arg-type]
    assert max_label(a, a) == a  # type: ignore[arg-type]
    assert label_rank(max_label(a, b)) >= max(label_rank(a), label_rank(b))  # type: ignore[arg-type]


@given(taint=taints, label=labels, untrusted=st.booleans())
def test_taint_only_rises(taint: Taint, label: str, untrusted: bool) -> None:
    raised = taint.raised_by(label, untrusted)  # type: ignore[arg-type]
    assert taint.is_lower_or_equal(raised)
    assert label_rank(raised.label) >= label_rank(label)  # type: ignore[arg-type]
    assert raised.untrusted == (taint.untrusted or untrusted)


@given(a=taints, b=taints)
def test_lower_or_equal_is_the_product_order(a: Taint, b: Taint) -> None:
    expected = label_rank(a.label) <= label_rank(b.label) and (b.untrusted or not a.untrusted)
    assert a.is_lower_or_equal(b) is expected


def test_new_session_is_the_bottom_and_fail_closed_the_top() -> None:
    for label, untrusted in itertools.product(LABELS, (False, True)):
        taint = Taint(label=label, untrusted=untrusted)
        assert NEW_SESSION.is_lower_or_equal(taint)
        assert taint.is_lower_or_equal(FAIL_CLOSED)
    assert not FAIL_CLOSED.is_lower_or_equal(NEW_SESSION)
