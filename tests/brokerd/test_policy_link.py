"""The policy's answers are brokerd's verdicts (an allowed or denied Decision, an Ask),
with protected paths."""

from __future__ import annotations

from boxmaker.brokerd._policy_link import PolicyLink
from boxmaker.policy._decision import Ask, Decision
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.proto._taint import NEW_SESSION

GRANTS = parse_grant_texts({"g.toml": """
[[grant]]
id = "notes"
tool = "read_file"
mode = "allow"
paths = ["/srv"]
label = "private"

[[grant]]
id = "docs"
tool = "http_fetch"
mode = "ask"
hosts = ["docs.python.org"]
"""})


def test_verdicts() -> None:
    link = PolicyLink.of(["/srv/boxmaker"])
    allowed = link.decide("read_file", {"path": "/srv/notes/a"}, NEW_SESSION, GRANTS)
    assert isinstance(allowed, Decision) and allowed.allowed and allowed.grant == "notes"
    assert allowed.label == "private" and allowed.untrusted is False
    spec = link.run_spec(call_id=4, session="s1", tool="read_file",
                         args={"path": "/srv/notes/a"}, allow=allowed)
    assert spec.grant_entry == "/srv" and spec.label == "private"
    protected = link.decide("read_file", {"path": "/srv/boxmaker/audit/x"}, NEW_SESSION, GRANTS)
    assert isinstance(protected, Decision) and protected.code == "protected"
    asked = link.decide("http_fetch", {"url": "https://docs.python.org/3/"}, NEW_SESSION,
                        GRANTS)
    assert isinstance(asked, Ask) and asked.grant == "docs"
    assert asked.untrusted is True
    again = link.redecide(asked, NEW_SESSION, GRANTS)
    assert isinstance(again, Decision) and again.allowed
    denied = link.redecide(asked, NEW_SESSION, parse_grant_texts({}))
    assert isinstance(denied, Decision) and denied.code == "changed"
