"""The policy package's public surface."""

from __future__ import annotations

import boxmaker.policy as policy


def test_exports() -> None:
    for name in policy.__all__:
        assert getattr(policy, name) is not None
    for needed in ("decide", "redecide", "Decision", "Ask", "GrantSet", "InvalidGrantSet",
                   "GrantsReport", "GrantsWatcher", "GrantsMissing", "load_grants",
                   "ProtectedPaths", "ToolCall", "explain_document"):
        assert needed in policy.__all__
    assert sorted(policy.__all__) == sorted(set(policy.__all__))
