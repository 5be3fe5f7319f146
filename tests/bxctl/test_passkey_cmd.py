"""`bxctl passkey add|list|remove` against the real brokerd (11-approvals-web)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import BXCTL, BrokerdProcess, Home, admin, env_for, start

ORIGIN = "http://localhost:8443"


@pytest.fixture
def brokerd() -> Iterator[tuple[Home, BrokerdProcess]]:
    home = Home(approvals_extra=f'rp_id = "localhost"\norigins = ["{ORIGIN}"]\n')
    proc = start(home)
    yield home, proc
    if proc.proc.poll() is None:
        proc.kill()
    home.cleanup()


def bxctl(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    # whole lines: bxctl wraps what it shows at the terminal's width (80 when not a terminal)
    return subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), *args],
                          env=env_for(home) | {"COLUMNS": "1000"}, capture_output=True,
                          text=True, timeout=60, check=False)


def test_add_prints_a_one_time_link_and_its_qr_code(brokerd: Any) -> None:
    home, _ = brokerd
    run = bxctl(home, "passkey", "add", "--name", "phone")
    assert run.returncode == 0, run.stderr
    link = [line.strip() for line in run.stdout.splitlines() if "/enrol#" in line]
    assert len(link) == 1 and link[0].startswith(f"{ORIGIN}/enrol#")
    assert "▀" in run.stdout or "▄" in run.stdout  # the QR code
    assert "\x1b" not in run.stdout
    token = link[0].rsplit("#", 1)[1]
    options = admin(home.admin, "passkey_options", {"token": token})["passkey_options"]
    assert options["name"] == "phone" and options["rp_id"] == "localhost"
    plain = bxctl(home, "passkey", "add", "--name", "laptop", "--no-qr")
    assert "▀" not in plain.stdout and "/enrol#" in plain.stdout


def test_list_shows_what_the_log_enrolled(brokerd: Any) -> None:
    home, _ = brokerd
    assert "0 enrolled" in bxctl(home, "passkey", "list").stdout
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    token = admin(home.admin, "passkey_enrol", {"action": "add", "name": "phone\u202e",
                                                 "credential_id": None})
    assert token["error"]["code"] == "bad_frame"  # a name that is not printable
    link = admin(home.admin, "passkey_enrol", {"action": "add", "name": "phone",
                                                "credential_id": None})["enrolment"]
    options = admin(home.admin, "passkey_options", {"token": link["token"]})["passkey_options"]
    done = admin(home.admin, "passkey_add", {"token": link["token"],
                                              "credential": key.create(options["creation"]),
                                              "assertion": None})
    assert done == {"id": 1, "ok": {}}
    run = bxctl(home, "passkey", "list")
    assert "1 enrolled" in run.stdout and key.id in run.stdout and "phone" in run.stdout
    document = json.loads(bxctl(home, "passkey", "list", "--json").stdout)
    assert document["items"][0]["credential_id"] == key.id
    assert document["origins"] == [ORIGIN] and document["require_passkey"] is False
    removal = bxctl(home, "passkey", "remove", "--no-qr", "--", key.id)  # ids may start with -
    assert removal.returncode == 0 and "/enrol#" in removal.stdout
    unknown = bxctl(home, "passkey", "remove", "AAAA")
    assert unknown.returncode == 1 and "no enrolled credential" in unknown.stderr
    bad = bxctl(home, "passkey", "remove", "not base64!")
    assert bad.returncode == 2


def test_add_without_an_approval_page_configured_says_how() -> None:
    home = Home()
    proc = start(home)
    try:
        run = bxctl(home, "passkey", "add", "--name", "phone")
        assert run.returncode == 1
        assert "rp_id and origins" in run.stderr
        assert "docs/runbook.md#passkey-required" in run.stderr
    finally:
        proc.stop()
        home.cleanup()


def test_add_prints_the_expiry_in_local_time_to_the_second_and_how_long(brokerd: Any) -> None:
    # Issue 22 item 5: it printed the wire's UTC with microseconds.
    home, _ = brokerd
    run = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "passkey", "add",
                          "--name", "phone", "--no-qr"], env=env_for(home) | {"TZ": "BXT-5:30"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    listed = admin(home.admin, "passkeys", {})
    assert listed["passkeys"]["items"] == []
    line = next(line for line in run.stdout.splitlines() if "before" in line)
    import re
    found = re.search(r"before (\d\d:\d\d:\d\d) BXT \(in 10 minutes\)", line)
    assert found is not None, line
    assert not re.search(r"\.\d{6}|Z\b", line), line
    import datetime as dt
    shown = dt.datetime.strptime(found.group(1), "%H:%M:%S").time()
    now = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=5, minutes=30, seconds=600)).time()
    gap = abs((dt.datetime.combine(dt.date.today(), now)
               - dt.datetime.combine(dt.date.today(), shown)).total_seconds())
    assert gap < 120 or gap > 86_400 - 120, (shown, now)
