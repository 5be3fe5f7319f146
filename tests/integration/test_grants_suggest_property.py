"""`bxctl grants suggest` never widens or launders (07-bxctl), on logs the real brokerd made.

For random grant sets and random calls at random taints, answered at random
(approve, refuse, leave), the draft is applied (its grants added, the grants it
replaces taken out) and replayed against the same log:

- it passes `bxctl grants check` on its own and applied;
- no call the owner refused, or a `deny` grant denied, becomes allowed;
- no suggested path is protected or at/below a deny grant's path, no host is
  one a deny grant names;
- no call's result label is lower with the draft than without it;
- exactly the calls its comments name change (and into what they say).
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxmaker.policy._decide import decide
from boxmaker.policy._decision import ProtectedPaths, ToolCall
from boxmaker.policy._load import load_grants
from boxmaker.policy._model import GrantSet
from boxmaker.proto._taint import Taint, label_rank
from tests.conftest import examples
from tests.fakes.brokerd import BXCTL, Home, env_for
from tests.integration.test_grants_replay_oracle import (
    PROTECTED,
    a_call,
    decisions,
    grant_set,
    run_calls,
)

pytestmark = pytest.mark.slow


def bxctl(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), *args], env=env_for(home), capture_output=True,
                          text=True, timeout=120, check=False)


def apply_draft(original: str, draft: str, directory: Path) -> None:
    """The draft applied as its header says: its grants added, the ones it replaces out."""
    replaced = set(re.findall(r"^# replaces grant (\S+) ", draft, re.M))
    kept = [t for t in re.split(r"(?m)^(?=\[\[grant\]\])", original)
            if t.strip() and re.search(r'^id = "(\S+)"', t, re.M).group(1) not in replaced]  # type: ignore[union-attr]
    directory.mkdir()
    (directory / "g.toml").write_text("".join(kept))
    (directory / "suggested.toml").write_text(draft)


def named_calls(draft: str) -> dict[int, str]:
    """call id -> what the comment says it becomes (ask or allowed)."""
    out: dict[int, str] = {}
    becomes = ""
    for line in draft.splitlines():
        if line.startswith("# asks for "):
            becomes = "ask"
        elif line.startswith("# allows "):
            becomes = "allowed"
        match = re.match(r"#   call (\d+) ", line)
        if match:
            out[int(match.group(1))] = becomes
    return out


def result_label(grants: GrantSet, tool: str, args: dict[str, Any], state: dict[str, Any],
                 protected: ProtectedPaths) -> int | None:
    taint = Taint(label=state["label"], untrusted=state["untrusted"])
    result = decide(ToolCall(tool=tool, args=args), taint, grants, protected)
    return None if result.label is None else label_rank(result.label)


@settings(max_examples=examples(6, at_least=2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(grants=grant_set(), calls=st.lists(a_call(), min_size=1, max_size=14),
       min_approvals=st.integers(min_value=1, max_value=2))
def test_suggest_never_widens_or_launders(grants: str, calls: list[Any],
                                          min_approvals: int) -> None:
    home = run_calls(grants, calls, "s")
    try:
        suggested = bxctl(home, "grants", "suggest", "--audit", str(home.audit),
                          "--min-approvals", str(min_approvals))
        assert suggested.returncode == 0, suggested.stderr
        draft = suggested.stdout
        alone = home.root / "draft"
        alone.mkdir()
        (alone / "suggested.toml").write_text(draft)
        assert bxctl(home, "grants", "check", str(alone)).returncode == 0
        applied = home.root / "applied"
        apply_draft(grants, draft, applied)
        assert bxctl(home, "grants", "check", str(applied)).returncode == 0, draft
        current = load_grants(home.grants)
        after = load_grants(applied)
        assert isinstance(current, GrantSet) and isinstance(after, GrantSet)
        replay = bxctl(home, "grants", "replay", "--grants", str(applied), "--audit",
                       str(home.audit), "--json")
        doc = json.loads(replay.stdout)
        changes = {c["call"]: c for c in doc["changes"]}
        refused = {r["approval"]["call"] for r in home.audit_lines()
                   if "approval" in r and r["approval"]["verdict"] == "refused"}
        for call_id, change in changes.items():
            if change["now"]["outcome"] == "allowed":
                assert call_id not in refused, change
                assert change["was"]["outcome"] != "denied:denied_by_grant", change
        # exactly the calls it names change, into what it says
        named = named_calls(draft)
        assert {k: c["now"]["outcome"] for k, c in changes.items()} == named, draft
        # nothing protected, nothing at or below a deny, no host a deny names
        protected = ProtectedPaths.of([PROTECTED])
        denied_paths = [p for g in current.grants if g.mode == "deny" for p in g.paths]
        denied_hosts = [h for g in current.grants if g.mode == "deny" for h in g.hosts]
        for table in tomllib.loads(draft).get("grant", []):
            for path in table.get("paths", []):
                assert protected.covering(path) is None
                assert not any(path == d or path.startswith(d + "/") for d in denied_paths)
            for host in table.get("hosts", []):
                name = host.partition(":")[0]
                assert "*" not in name
                assert not any(h.matches_host(name) for h in denied_hosts)
            if table["tool"] == "http_fetch":
                assert table["untrusted"] is True
        # no result label falls
        protected_all = ProtectedPaths.of([PROTECTED, str(home.home)])
        for _, call, decision in decisions(home):
            before = result_label(current, call["tool"], call["args"], decision["state"],
                                  protected_all)
            later = result_label(after, call["tool"], call["args"], decision["state"],
                                 protected_all)
            if before is not None and later is not None:
                assert later >= before, call
    finally:
        home.cleanup()
