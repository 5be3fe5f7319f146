"""A probe's egress end to end (issue 26): the real brokerd, a real podman, the real log.

Two declarations of the hand-written fixture server (its source given to
``python3 -c``), each CONNECTing through ``HTTPS_PROXY`` at `tools/list` to a
granted and another name (``list_via``) and writing what they answered into
echo's description.  ``net`` has `hosts`: its probe runs beside a
``-net-p<probe id>`` sidecar, the other name is refused unresolved, and the
connections are in an `mcp_server probed` record after the `probe` record.
``bare`` has none: ``--network=none``, no proxy, no `probed` record.
brokerd's start-up sweep removed a left-over ``-net-p`` sidecar of its
instance first.  `bxctl audit verify` accepts the log.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from boxmaker.brokerd.runner._podman_argv import instance_id
from tests.fakes.brokerd import BXCTL, Home, admin, env_for, start
from tests.fakes.podman import tools_image

FAKE_SOURCE = (Path(__file__).resolve().parents[1] / "fakes" / "mcp_stdio_server.py").read_text()
GRANTED = "granted.invalid.example:8443"
OTHER = "other.invalid.example:8443"


def source_text(image: str, server: str, hosts: list[str]) -> str:
    command = ["/usr/bin/python3", "-I", "-c", FAKE_SOURCE,
               json.dumps({"list_via": [GRANTED, OTHER]})]
    return f'''[[mcp_server]]
id = "{server}"
image = "{image}"
command = {json.dumps(command)}
label = "private"
protocol = "2026-07-28"
start_timeout_ms = 120000
hosts = {json.dumps(hosts)}
'''


def _names() -> list[str]:
    return subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True).stdout.split()


def reached(answer: dict[str, Any]) -> str:
    assert "mcp_probe" in answer, answer
    echo = next(t for t in answer["mcp_probe"]["tools"] if t["name"] == "echo")
    text: str = echo["raw"]["description"]
    return text.split(" Reached: ", 1)[1]


@pytest.mark.podman
def test_a_probe_gets_the_servers_hosts_and_the_sweep_takes_a_left_over_sidecar() -> None:
    image = tools_image()
    home = Home(runner="podman", grants={"none.toml": ""}, fsync=False,
                runner_extra=f'image = "{image}"\ntimeout_ms = 120000\n')
    instance = instance_id(home.home)
    left_over = f"boxmaker-{instance}-net-p77"
    try:
        (home.home / "sources").mkdir()
        (home.home / "sources" / "net.toml").write_text(source_text(image, "net", [GRANTED]))
        (home.home / "sources" / "bare.toml").write_text(source_text(image, "bare", []))
        subprocess.run(["podman", "create", "--pull=never", "--name", left_over,
                        "--network=none", image, "true"], check=True, capture_output=True)
        proc = start(home, timeout=120)
        try:
            swept = left_over not in _names()
            net = admin(home.admin, "mcp_probe", {"server": "net"}, timeout=300)
            bare = admin(home.admin, "mcp_probe", {"server": "bare"}, timeout=300)
        finally:
            assert proc.stop() == 0, proc.log()
        assert swept, "brokerd's start did not remove the left-over -net-p sidecar"
        assert [n for n in _names() if n.startswith(f"boxmaker-{instance}-")] == []
        # The granted name does not resolve here (403 from the sidecar), the other is
        # refused unresolved; without hosts there is no proxy at all.
        assert reached(net) == "HTTP/1.1 403 Forbidden |  ; HTTP/1.1 403 Forbidden | "
        assert reached(bare) == "error: ECONNREFUSED ; error: ECONNREFUSED"
        records = home.events("mcp_server")
        assert [(r["server"], r["event"]) for r in records] == [
            ("net", "probe"), ("net", "probed"), ("bare", "probe")]
        probe_id = net["mcp_probe"]["probe_id"]
        probed = records[1]
        assert probed["probe_id"] == probe_id == records[0]["probe_id"]
        assert probed["container"] == f"boxmaker-{instance}-mcp-net-p{probe_id}"
        assert probed["reason"] is None and probed["egress_truncated"] is False
        assert [(e["host"], e["port"], e["address"], e["refused"])
                for e in probed["egress"]] == [
            ("granted.invalid.example", 8443, None, None),
            ("other.invalid.example", 8443, None, "not_allowed")]
        assert "egress" not in records[0] and "egress" not in records[2]
        verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                                capture_output=True, text=True, env=env_for(home),
                                check=False, timeout=120)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        subprocess.run(["podman", "rm", "--force", "--ignore", left_over],
                       check=False, capture_output=True)
        home.cleanup()
