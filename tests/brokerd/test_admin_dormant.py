"""admin.sock's `grants_check` through the real brokerd lists the dormant grants
(12-tool-sources "Grants for tool-source tools"), from brokerd's own pin state: the
same grants are live while the server is pinned and dormant once it is unpinned, and
the set stays valid; `bxctl grants check` offline agrees while the pin holds."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.brokerd._mcp_home import pin_for, pin_in_log
from tests.brokerd.test_mcp_decide import SOURCE, TOOLS
from tests.fakes.brokerd import BXCTL, Home, admin, env_for, start

GRANTS = '''
[[grant]]
id = "time-small"
tool = "mcp.time.get_current_time"
mode = "allow"
args.n = { max = 3 }

[[grant]]
id = "time-nope"
tool = "mcp.time.get_current_time"
mode = "ask"
args.nope = { max = 3 }

[[grant]]
id = "time-gone"
tool = "mcp.time.gone"
mode = "deny"
'''


@pytest.fixture
def home() -> Iterator[Home]:
    made = Home(grants={"time.toml": GRANTS})
    (made.home / "sources").mkdir()
    (made.home / "sources" / "time.toml").write_text(SOURCE)
    yield made
    made.cleanup()


def test_grants_check_lists_dormant_grants_and_an_unpin_makes_them_all_dormant(
        home: Home) -> None:
    pin_in_log(home, pin_for(SOURCE, "time", TOOLS))
    proc = start(home)
    try:
        before = admin(home.admin, "grants_check", {})["grants_report"]
        offline = subprocess.run([str(BXCTL), "grants", "check", "--json"],
                                 capture_output=True, text=True, env=env_for(home),
                                 check=False)
        admin(home.admin, "mcp_unpin", {"server": "time", "reason": None})
        after = admin(home.admin, "grants_check", {})["grants_report"]
    finally:
        assert proc.stop() == 0, proc.log()
    assert before["ok"] is True and before["count"] == 3 and before["problems"] == []
    assert [(d["grant"], d["rule"]) for d in before["dormant"]] == [("time-nope", "G11"),
                                                                    ("time-gone", None)]
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["dormant"] == before["dormant"]
    assert after["ok"] is True and after["count"] == 3
    assert {d["grant"] for d in after["dormant"]} == {"time-small", "time-nope", "time-gone"}
    assert all("unpinned (unpinned)" in d["reason"] for d in after["dormant"])
