"""A probe's `invalidates`: the grants a re-pin would make dormant or whose tool it would
disable, with the rule; nothing without a current pin."""

from __future__ import annotations

from typing import Any

from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._mcp_invalidates import invalidated
from boxmaker.proto.mcp import SourceSet, parse_source_texts, tool_verdicts
from tests.brokerd._mcp_home import pin_for
from tests.brokerd.test_mcp_decide import SCHEMA, SOURCE, TOOLS

GRANTS = '''
[[grant]]
id = "a-small"
tool = "mcp.time.get_current_time"
mode = "allow"
args.n = { max = 3 }

[[grant]]
id = "b-convert"
tool = "mcp.time.convert_time"
mode = "ask"

[[grant]]
id = "c-no-tz"
tool = "mcp.time.get_current_time"
mode = "deny"
args.timezone = { values = ["Mars/Olympus"] }

[[grant]]
id = "d-echo"
tool = "echo"
mode = "allow"
'''


def verdicts(tools: list[dict[str, Any]]) -> Any:
    pin = pin_for(SOURCE, "time", tools)
    state = parse_source_texts({"s.toml": SOURCE})
    assert isinstance(state, SourceSet)
    return tool_verdicts(state.servers["time"], pin)


def test_a_repin_names_what_it_costs() -> None:
    grants = parse_grant_texts({"g.toml": GRANTS})
    current = verdicts(TOOLS)
    narrowed = {**SCHEMA, "properties": {"n": SCHEMA["properties"]["n"]}}
    candidate = verdicts([{**TOOLS[0], "inputSchema": narrowed}])  # convert_time removed
    assert invalidated(grants, "time", current=current, candidate=candidate) == [
        ("b-convert", None), ("c-no-tz", "G11")]
    assert invalidated(grants, "time", current=current, candidate=current) == []
    assert invalidated(grants, "time", current=None, candidate=candidate) == []
    assert invalidated(grants, "other", current=current, candidate=candidate) == []
