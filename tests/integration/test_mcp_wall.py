"""The wall of an MCP call end to end: the real brokerd, a real podman, the real log.

The hand-written fixture server runs in the tools image (its source given to
``python3 -c``, so nothing of the repository is mounted).  Granted calls go
through brokerd's decision, its RunSpec and the MCP runtime: ``look`` on a
granted directory sees it read-only with a `deny read_file` subtree masked,
and nothing of brokerd's home; ``look`` on brokerd's home is denied
(`protected`) before anything runs; ``get`` with `egress = "arg:url"` runs
beside its sidecar: a CONNECT to another name is refused without being
resolved, and every connection is in ``result.source.egress``;
`bxctl audit verify` accepts the log.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.brokerd._mcp_home import pin_for, pin_in_log
from tests.brokerd.runner._mcp_fixtures import fake_command, server_toml
from tests.fakes.brokerd import BXCTL, Home, call_request, env_for, request, start
from tests.fakes.mcp_stdio_server import tools as fake_tools
from tests.fakes.podman import tools_image


def source_text(image: str) -> str:
    return server_toml(image, fake_command("files", "fetch", inline=True), untrusted=True,
                       tools={"look": {"path": "path"}, "get": {"url": "url"}},
                       egress={"get": "arg:url"})


def grants(proj: Path) -> str:
    return f'''
[[grant]]
id = "look-proj"
tool = "mcp.fake.look"
mode = "allow"
max_label = "private"
untrusted = true
when_untrusted = "allow"
args.path = {{ paths = ["{proj}"] }}

[[grant]]
id = "get-one"
tool = "mcp.fake.get"
mode = "allow"
max_label = "private"
untrusted = true
when_untrusted = "allow"
args.url = {{ hosts = ["granted.invalid.example:8443"] }}

[[grant]]
id = "no-keys"
tool = "read_file"
mode = "deny"
paths = ["{proj}/keys"]
'''


@pytest.mark.podman
def test_mounts_and_egress_through_brokerd(tmp_path: Path) -> None:
    image = tools_image()
    proj = tmp_path / "proj"
    (proj / "keys").mkdir(parents=True)
    (proj / "keys" / "id").write_text("private key\n")
    (proj / "notes.txt").write_text("my notes\n")
    home = Home(runner="podman", grants={"fake.toml": grants(proj)}, fsync=False)
    try:
        text = home.config.read_text().replace(
            'kind = "podman"\n', f'kind = "podman"\nimage = "{image}"\ntimeout_ms = 120000\n')
        home.config.write_text(text)
        (home.home / "sources").mkdir()
        (home.home / "sources" / "fake.toml").write_text(source_text(image))
        pin_in_log(home, pin_for(source_text(image), "fake", fake_tools({"files", "fetch"}),
                                 protocol="2026-07-28"))
        secret = home.config
        proc = start(home)
        try:
            looked = request(home.broker, call_request("s1", "mcp.fake.look", {
                "path": str(proj), "also": [f"{proj}/keys/id", str(secret)],
                "write": f"{proj}/new.txt"}), timeout=240)
            protected = request(home.broker, call_request("s1", "mcp.fake.look",
                                                          {"path": str(secret)}, rid=2))
            got = request(home.broker, call_request("s1", "mcp.fake.get", {
                "url": "https://granted.invalid.example:8443/",
                "via": ["granted.invalid.example:8443", "other.invalid.example:8443",
                        "10.0.0.1:8443"]}, rid=3), timeout=240)
        finally:
            assert proc.stop() == 0, proc.log()
        assert "result" in looked[-1], looked
        answer = looked[-1]["result"]
        assert answer["status"] == "ok", looked
        found = json.loads(answer["output"]["content"][0]["text"])
        assert found == {"path": ["keys", "notes.txt"], "also": ["error: ENOENT"] * 2,
                         "write": "error: EROFS"}
        assert protected[-1]["denied"]["code"] == "protected"
        lines = json.loads(got[-1]["result"]["output"]["content"][0]["text"])
        assert [line.split(" |")[0] for line in lines] == [
            "HTTP/1.1 403 Forbidden"] * 3  # the granted name does not resolve here
        results = home.events("result")
        assert [r["status"] for r in results] == ["ok", "ok"]
        egress = results[1]["source"]["egress"]
        assert [(e["host"], e["port"], e["address"], e["refused"]) for e in egress] == [
            ("granted.invalid.example", 8443, None, None),
            ("other.invalid.example", 8443, None, "not_allowed"),
            (None, 8443, None, "not_allowed")]
        assert results[0]["source"]["egress"] == []
        verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                                capture_output=True, text=True, env=env_for(home),
                                check=False, timeout=120)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        home.cleanup()
