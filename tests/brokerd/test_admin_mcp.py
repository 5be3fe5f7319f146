"""admin.sock's MCP requests through the real brokerd (12-tool-sources "Wire changes"),
without podman: the sources report, each server's state, an unpin (recorded, and the
server offers nothing from then on), the end of a cool-down that was not running (not
recorded), a pin with an unknown probe id, a probe of an undeclared server, a probe
while the source set is invalid, and a probe with no runtime for MCP servers.  The
probe and the pin of a live server are in tests/integration/test_mcp_pin.py (podman).
The log verifies afterwards."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.brokerd._mcp_home import pin_for, pin_in_log
from tests.brokerd.test_mcp_decide import GRANTS, SOURCE, TOOLS
from tests.fakes.brokerd import BXCTL, Home, admin, call_request, env_for, request, start


@pytest.fixture
def home() -> Iterator[Home]:
    made = Home(grants={"time.toml": GRANTS})
    (made.home / "sources").mkdir()
    (made.home / "sources" / "time.toml").write_text(SOURCE)
    yield made
    made.cleanup()


def _verify(home: Home) -> None:
    verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                            capture_output=True, text=True, env=env_for(home), check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_status_report_unpin_and_restart(home: Home) -> None:
    pin = pin_for(SOURCE, "time", TOOLS)
    pin_in_log(home, pin)
    proc = start(home)
    try:
        report = admin(home.admin, "sources_check", {})["sources_report"]
        status = admin(home.admin, "mcp_status", {})["mcp_status"]
        restart = admin(home.admin, "mcp_restart", {"server": "time"})
        unknown = admin(home.admin, "mcp_unpin", {"server": "git", "reason": None})
        unpin = admin(home.admin, "mcp_unpin", {"server": "time", "reason": "review\x1b[2J"})
        after = admin(home.admin, "mcp_status", {})["mcp_status"]
        call = request(home.broker, call_request("s1", "mcp.time.get_current_time",
                                                 {"n": 1}))
    finally:
        assert proc.stop() == 0, proc.log()
    assert report["ok"] is True and report["count"] == 1 and report["problems"] == []
    assert status == {"servers": [{"id": "time", "state": "pinned", "reason": None,
                                   "pin": pin.digest, "offered": 2, "disabled": [],
                                   "failures": 0}]}
    assert restart == {"id": 1, "ok": {}}
    assert unknown["error"]["code"] == "no_such_server"
    assert unpin == {"id": 1, "ok": {}}
    (server,) = after["servers"]
    assert (server["state"], server["reason"], server["pin"]) == ("unpinned", "unpinned", None)
    assert call[-1]["denied"]["code"] == "source_unpinned"
    pins = home.events("mcp_pin")
    assert [p["action"] for p in pins] == ["pinned", "unpinned"]
    assert pins[1]["prev"] == pin.digest and pins[1]["digest"] is None
    assert pins[1]["reason"] == "review\\u{001B}[2J"  # escaped before the log
    assert home.events("mcp_server") == []  # no cool-down was running: nothing recorded
    _verify(home)


def test_probe_and_pin_refusals(home: Home) -> None:
    proc = start(home)
    try:
        unknown = admin(home.admin, "mcp_probe", {"server": "git"})
        no_runtime = admin(home.admin, "mcp_probe", {"server": "time"})
        no_probe = admin(home.admin, "mcp_pin", {"server": "time", "probe_id": 7,
                                                 "digest": "ab" * 32, "invalidates": []})
        (home.home / "sources" / "bad.toml").write_text("[[mcp_server]]\nid = 'x'\n")
        invalid = admin(home.admin, "mcp_probe", {"server": "time"})
        report = admin(home.admin, "sources_check", {})["sources_report"]
        status = admin(home.admin, "mcp_status", {})["mcp_status"]
    finally:
        assert proc.stop() == 0, proc.log()
    assert unknown["error"]["code"] == "no_such_server"
    assert no_runtime["error"] == {
        "code": "source_unavailable", "runbook": "docs/runbook.md#source-unavailable",
        "message": no_runtime["error"]["message"]}
    assert "podman" in no_runtime["error"]["message"]
    assert no_probe["error"]["code"] == "no_such_probe"
    assert invalid["error"]["code"] == "sources_invalid"
    assert invalid["error"]["runbook"] == "docs/runbook.md#sources-invalid"
    assert report["ok"] is False and {p["file"] for p in report["problems"]} == {"bad.toml"}
    assert status == {"servers": []}
    assert home.events("mcp_server") == [] and home.events("mcp_pin") == []
    _verify(home)


def test_a_probe_with_hosts_starts_its_sidecar_and_records_probed() -> None:
    """Issue 26: a server with `hosts` is probed beside a `-net-p<probe id>` sidecar
    (here the stand-in podman's, which never becomes ready: the probe fails before the
    server starts), and the end of the probe is an `mcp_server probed` record, with no
    connections, after the `probe` record; a server without `hosts` runs no sidecar
    and has no `probed` record."""
    from tests.brokerd._mcp_home import fake_mcp_home

    home = fake_mcp_home({"net": [], "bare": []})
    try:
        source = home.home / "sources" / "net.toml"
        source.write_text(source.read_text() + 'hosts = ["api.example.org"]\n')
        proc = start(home)
        try:
            net = admin(home.admin, "mcp_probe", {"server": "net"}, timeout=60)
            bare = admin(home.admin, "mcp_probe", {"server": "bare"}, timeout=60)
        finally:
            assert proc.stop() == 0, proc.log()
        assert net["error"]["code"] == "source_unavailable", net
        assert "did not become ready" in net["error"]["message"]
        assert "mcp_probe" in bare, bare
        records = home.events("mcp_server")
        assert [(r["server"], r["event"]) for r in records] == [
            ("net", "probe"), ("net", "probed"), ("bare", "probe")]
        probed = records[1]
        assert probed["probe_id"] == records[0]["probe_id"]
        assert probed["container"] == records[0]["container"]
        assert probed["egress"] == [] and probed["egress_truncated"] is False
        assert "did not become ready" in probed["reason"]
        calls = (home.root / "podman-state" / "calls").read_text().splitlines()
        sidecars = [json.loads(line) for line in calls if '"egress-forward"' in line]
        assert len(sidecars) == 1
        name = sidecars[0][sidecars[0].index("--name") + 1]
        assert name == records[0]["container"].replace(
            "-mcp-net-p", "-net-p")  # boxmaker-<instance>-net-p<probe id>
        _verify(home)
    finally:
        home.cleanup()
