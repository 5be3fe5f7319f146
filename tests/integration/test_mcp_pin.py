"""Pinning from a live probe through the real brokerd and a real podman (12-tool-sources
"Pinning"): the reference `mcp-server-time` (scripts/build-mcp-image) probed (the
`mcp_server probe` record before its container), pinned with a passkey under
`require_passkey`, the pin used by `mcp_status`, unpinned, and pinned again from a new
probe; and the same through `bxctl mcp pin|unpin|list|show`.  The acceptance attack:
the first pin's request replayed (its probe is used up: `no_such_probe`) and its
assertion replayed for the new probe (another challenge: `passkey_required`, recorded
as an attempt; a refused passkey leaves the probe held, so the right assertion then
pins).  The log verifies afterwards."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from click.testing import CliRunner

from boxmaker.bxctl._cli import cli
from boxmaker.proto.mcp import pin_challenge
from boxmaker.proto.wire._wire_passkey import b64url
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import BXCTL, Home, admin, env_for, start
from tests.fakes.podman import mcp_image, tools_image
from tests.integration.test_mcp_brokerd import GRANT, source_text
from tests.integration.test_passkey_brokerd import ORIGIN, PASSKEYS, enrol

PROBE_S = 300


def mcp_home(image: str, approvals_extra: str = "") -> Home:
    home = Home(runner="podman", grants={"time.toml": GRANT}, fsync=False,
                approvals_extra=approvals_extra,
                runner_extra=f'image = "{tools_image()}"\ntimeout_ms = 120000\n')
    (home.home / "sources").mkdir()
    (home.home / "sources" / "time.toml").write_text(source_text(image))
    return home


def probe(home: Home) -> dict[str, Any]:
    answer = admin(home.admin, "mcp_probe", {"server": "time"}, timeout=PROBE_S)
    assert "mcp_probe" in answer, answer
    return dict(answer["mcp_probe"])


def pin_body(found: dict[str, Any], assertion: Any = None) -> dict[str, Any]:
    body = {"server": "time", "probe_id": found["probe_id"], "digest": found["digest"],
            "invalidates": found["invalidates"]}
    return body if assertion is None else {**body, "assertion": assertion}


def challenge(found: dict[str, Any]) -> str:
    return b64url(pin_challenge(server="time", probe_id=found["probe_id"],
                                digest=found["digest"], invalidates=found["invalidates"]))


@pytest.mark.podman
def test_pin_unpin_pin_with_a_passkey_and_replays_refused() -> None:
    home = mcp_home(mcp_image(), PASSKEYS + "require_passkey = true\n")
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    proc = start(home)
    try:
        assert "ok" in enrol(home, key)
        first = probe(home)
        bare = admin(home.admin, "mcp_pin", pin_body(first))
        signed = key.get(challenge(first))
        pinned = admin(home.admin, "mcp_pin", pin_body(first, signed))
        replayed = admin(home.admin, "mcp_pin", pin_body(first, signed))
        status = admin(home.admin, "mcp_status", {})["mcp_status"]
        unpinned = admin(home.admin, "mcp_unpin", {"server": "time", "reason": None})
        second = probe(home)
        old_assertion = admin(home.admin, "mcp_pin", pin_body(second, signed))
        again = admin(home.admin, "mcp_pin", pin_body(second, key.get(challenge(second))))
        last = admin(home.admin, "mcp_status", {})["mcp_status"]
    finally:
        assert proc.stop() == 0, proc.log()
    assert first["server"] == "time" and first["pinned"] is None
    assert first["protocol"] == "2025-11-25" and first["invalidates"] == []
    names = [tool["name"] for tool in first["tools"]]
    assert names == sorted(names) and "get_current_time" in names
    assert {tool["status"] for tool in first["tools"]} == {"added"}
    assert bare["error"]["code"] == "passkey_required"
    assert pinned == {"id": 1, "ok": {}}
    assert replayed["error"]["code"] == "no_such_probe"
    (server,) = status["servers"]
    assert server["state"] == "pinned" and server["pin"] == first["digest"]
    assert server["offered"] == len(names)
    assert unpinned == {"id": 1, "ok": {}}
    assert second["pinned"] is None and second["digest"] == first["digest"]
    assert old_assertion["error"]["code"] == "passkey_required"
    assert again == {"id": 1, "ok": {}}
    assert last["servers"][0]["state"] == "pinned"
    # Each probe's record came before its container; each pin's after its file.
    probes = home.events("mcp_server")
    assert [p["event"] for p in probes] == ["probe"] * 2
    assert [p["probe_id"] for p in probes] == [first["probe_id"], second["probe_id"]]
    assert probes[0]["container"].endswith(f"-mcp-time-p{first['probe_id']}")
    pins = home.events("mcp_pin")
    assert [p["action"] for p in pins] == ["pinned", "unpinned", "pinned"]
    assert pins[0]["passkey"]["credential_id"] == pins[2]["passkey"]["credential_id"]
    assert pins[2]["prev"] == first["digest"] and pins[0]["by"] == os.getuid()
    assert (home.audit / "pins" / f"{first['digest']}.json").is_file()
    assert len(home.events("approval_attempt")) == 2  # the bare pin and the replay
    verify = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                            capture_output=True, text=True, env=env_for(home), check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def bxctl(home: Home, *args: str, answers: str = "") -> Any:
    return CliRunner().invoke(cli, ["--admin-socket", str(home.admin), "mcp", *args],
                              input=answers)


@pytest.mark.podman
def test_bxctl_pins_unpins_and_pins_again() -> None:
    home = mcp_home(mcp_image())
    proc = start(home)
    try:
        first = bxctl(home, "pin", "time", answers="y\n")
        unchanged = bxctl(home, "pin", "time", "--yes")
        listed = bxctl(home, "list")
        unpinned = bxctl(home, "unpin", "time", "--reason", "review")
        declined = bxctl(home, "pin", "time", "--yes", answers="n\n")
        again = bxctl(home, "pin", "time", answers="y\n")
        shown = bxctl(home, "show", "time", "--json")
    finally:
        assert proc.stop() == 0, proc.log()
    assert first.exit_code == 0, first.output
    assert "+ tool get_current_time  (added)" in first.output
    assert "pinned time " in first.output
    assert unchanged.exit_code == 0 and "?" not in unchanged.output  # nothing changed
    assert "time  pinned" in listed.output
    assert unpinned.exit_code == 0
    assert declined.exit_code == 1 and "not pinned" in declined.output  # a change: asked
    assert again.exit_code == 0, again.output
    view = json.loads(shown.output)
    assert view["state"] == "pinned"
    pins = home.events("mcp_pin")
    assert [p["action"] for p in pins] == ["pinned", "pinned", "unpinned", "pinned"]
    assert view["pin"] == pins[0]["digest"] == pins[-1]["digest"]
    assert [p["event"] for p in home.events("mcp_server")] == ["probe"] * 4
