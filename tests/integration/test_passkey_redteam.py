"""Red-team review of passkey-signed approvals (issue 16) against the real brokerd.

Each test is an attack that worked before its fix (docs/decisions.md, "Red-team
review of issues 16 and 11"); brokerd runs as a real process over its sockets.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from typing import Any

import cbor2
import pytest

from boxmaker.proto.audit._audit import line_hash
from boxmaker.proto.wire._wire_passkey import b64url, from_b64url
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import (
    BXCTL,
    BrokerdProcess,
    admin,
    connect,
    env_for,
    frame,
    read_frames,
    start,
)
from tests.integration.test_passkey_brokerd import ORIGIN, approve, enrol, make_home, pending

__all__ = ["make_home"]


def _at_once(home: Any, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send every request on its own admin.sock connection at the same moment."""
    sockets = [connect(home.admin) for _ in requests]
    barrier = threading.Barrier(len(requests))
    answers: list[dict[str, Any]] = [{} for _ in requests]

    def send(index: int, sock: socket.socket) -> None:
        barrier.wait()
        sock.sendall(frame(requests[index]))
        answers[index] = next(read_frames(sock))

    threads = [threading.Thread(target=send, args=(i, s)) for i, s in enumerate(sockets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for sock in sockets:
        sock.close()
    return answers


def test_first_enrolments_at_once_enrol_one_passkey(make_home: Any) -> None:
    # A process on admin.sock keeps links of its own ready and races the owner's
    # first enrolment: every add passed "nothing enrolled yet" before any was
    # recorded, so all of them went in without an assertion.
    home, proc = make_home()
    adds = []
    for index in range(6):
        key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
        link = admin(home.admin, "passkey_enrol", {"action": "add", "name": f"key{index}",
                                                    "credential_id": None})["enrolment"]
        options = admin(home.admin, "passkey_options",
                        {"token": link["token"]})["passkey_options"]
        adds.append({"v": 1, "id": index, "passkey_add": {
            "token": link["token"], "credential": key.create(options["creation"]),
            "assertion": None}})
    answers = _at_once(home, adds)
    outcomes = sorted("ok" if "ok" in a else a["error"]["code"] for a in answers)
    assert outcomes == ["ok"] + ["passkey_required"] * 5, answers
    assert len(admin(home.admin, "passkeys", {})["passkeys"]["items"]) == 1
    assert len(home.events("passkey")) == 1
    assert proc.stop() == 0


def _forge(home: Any, event: dict[str, Any], *, after: str | None = None) -> None:
    """Put a `passkey`-form record into the newest day file.

    With `after` (an event key), the line goes in after the first record of
    that kind, as someone who cannot rewrite the chain would put it; without,
    it is appended at the end, chained to the last line.
    """
    day = sorted(p for p in home.audit.iterdir() if p.name.endswith(".jsonl"))[-1]
    lines = day.read_bytes().splitlines()
    at = len(lines)
    if after is not None:
        at = next(i for i, line in enumerate(lines) if f'"{after}":'.encode() in line) + 1
    before = json.loads(lines[at - 1])
    record = {"seq": before["seq"] + 1, "ts": before["ts"], "prev": line_hash(lines[at - 1])}
    record.update(event)
    lines.insert(at, json.dumps(record, separators=(",", ":"), sort_keys=False).encode())
    day.write_bytes(b"\n".join(lines) + b"\n")


def _added(key: SoftAuthenticator, **overrides: Any) -> dict[str, Any]:
    creation = {"rp": {"id": "localhost"}, "challenge": b64url(b"x" * 32)}
    attestation = cbor2.loads(from_b64url(key.create(creation)["response"]["attestationObject"]))
    auth_data = attestation["authData"]
    cose = auth_data[37 + 16 + 2 + len(key.credential_id):]
    return {"passkey": {"action": "added", "credential_id": key.id, "name": "forged",
                        "public_key": b64url(cose), "by": os.getuid()} | overrides}


def _verify(home: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)], env=env_for(home),
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_passkey_record_put_into_a_broken_log_enrols_nothing(make_home: Any) -> None:
    # Someone who can write the audit files but not rewrite the chain puts a
    # `passkey added` record of their own key in; brokerd refuses the log, and
    # the owner, following the runbook, starts once with --accept-break.  The
    # records of the damaged log were all taken in, so the planted key became
    # the owner's passkey and approved calls under require_passkey.
    home, proc = make_home()
    owner = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, owner)
    sock, waiting = pending(home)
    sock.close()
    assert proc.stop() == 0
    planted = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    _forge(home, _added(planted), after="passkey")
    assert _verify(home).returncode != 0
    refused = BrokerdProcess(home)
    assert refused.proc.wait(60) != 0
    refused.close()
    proc = start(home, args=("--accept-break",))
    listed = admin(home.admin, "passkeys", {})["passkeys"]["items"]
    assert planted.id not in [p["credential_id"] for p in listed]
    sock, waiting = pending(home, rid=12)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    forged = approve(home, waiting["approval_id"], planted.get(shown["challenge"]))
    assert forged["error"]["code"] == "passkey_required", forged
    # The owner's own credential, enrolled before the break, is not trusted
    # either (the damaged part of the log is where it came from): enrol again.
    assert listed == []
    assert "break" in proc.log() and "enrol" in proc.log()
    sock.close()
    # Enrolled again after the break, the owner's passkey is trusted at the
    # next plain start, which says nothing more about the break.
    assert enrol(home, owner) == {"id": 1, "ok": {}}
    assert proc.stop() == 0
    proc = start(home)
    listed = admin(home.admin, "passkeys", {})["passkeys"]["items"]
    assert [p["credential_id"] for p in listed] == [owner.id]
    warnings = admin(home.admin, "status", {})["status"]["warnings"]
    assert not any("break" in w for w in warnings), warnings
    assert proc.stop() == 0


@pytest.mark.parametrize("event", [
    {"passkey": {"action": "added", "credential_id": "", "name": "x", "public_key": "AA",
                 "by": 0}},
    {"passkey": {"action": "added", "credential_id": "a+b/", "name": "x", "public_key": "AA",
                 "by": 0}},
    {"passkey": {"action": "added", "credential_id": "AA", "name": "x", "public_key": "",
                 "by": 0}},
    {"passkey": {"action": "added", "credential_id": "AA", "name": "\u001b[2Jx",
                 "public_key": "AA", "by": 0}},
    {"passkey": {"action": "added", "credential_id": "AA", "name": "", "public_key": "AA",
                 "by": 0}},
    {"passkey": {"action": "removed", "credential_id": "AA", "name": "x", "public_key": "AA",
                 "by": 0}},
    {"approval_attempt": {"approval_id": None, "by": 0, "reason": "x" * 70_000}},
], ids=["empty-id", "not-base64url-id", "added-without-key", "control-in-name", "empty-name",
        "removed-with-key", "huge-reason"])
def test_audit_verify_refuses_a_malformed_passkey_record(make_home: Any,
                                                          event: dict[str, Any]) -> None:
    # Well chained (appended at the end), but not a form brokerd writes.
    home, proc = make_home()
    enrol(home, SoftAuthenticator(rp_id="localhost", origin=ORIGIN))
    assert proc.stop() == 0
    assert _verify(home).returncode == 0
    _forge(home, event)
    run = _verify(home)
    assert run.returncode != 0, run.stdout
    assert "bad_record" in run.stdout + run.stderr


def test_an_assertion_cannot_write_to_the_owners_terminal_through_brokerds_log(
        make_home: Any) -> None:
    # The webauthn package quotes a wrong origin as found: a process on
    # admin.sock put terminal controls (and 40 KB) into brokerd's log and into
    # every approval_attempt record.
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    hostile = "\x1b]0;owned\x07\x1b[2J" + "A" * 40_000
    answer = approve(home, waiting["approval_id"], key.get(shown["challenge"], origin=hostile))
    assert answer["error"]["code"] == "passkey_required"
    message = answer["error"]["message"]
    assert "\x1b" not in message and "\\u{001B}]0;owned" in message and len(message) <= 1024
    assert [len(r["reason"]) <= 1024 for r in home.events("approval_attempt")] == [True]
    sock.close()
    assert proc.stop() == 0
    assert b"\x1b" not in (home.root / "brokerd.log").read_bytes()
    assert _verify(home).returncode == 0


def test_a_credential_id_longer_than_webauthn_allows_is_not_enrolled(make_home: Any) -> None:
    # The first enrolment (open to admin.sock) with a 50 000-byte credential id
    # went in; its `passkey` record is beyond what the verifier accepts, so
    # brokerd would refuse its own log at the next start.
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    key.credential_id = os.urandom(50_000)
    answer = enrol(home, key)
    assert answer["error"]["code"] == "passkey_required", str(answer)[:300]
    assert "1023 bytes" in answer["error"]["message"]
    assert home.events("passkey") == []
    assert proc.stop() == 0
    assert _verify(home).returncode == 0
    start(home).stop()


def test_audit_show_reads_a_log_with_passkey_records(make_home: Any) -> None:
    # One bare approve under require_passkey (anyone on admin.sock) wrote an
    # approval_attempt, and `bxctl audit show` died on it (KeyError) before
    # the records after it: the owner could no longer read the log.
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    sock, waiting = pending(home)
    assert approve(home, waiting["approval_id"], None)["error"]["code"] == "passkey_required"
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    assert approve(home, waiting["approval_id"], key.get(shown["challenge"]))["ok"] == {}
    sock.close()
    assert proc.stop() == 0
    run = subprocess.run([str(BXCTL), "audit", "show", str(home.audit)], env=env_for(home)
                         | {"COLUMNS": "400"}, capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = run.stdout.splitlines()
    assert any("passkey" in r and f"added {key.id} (phone)" in r for r in rows)
    assert any("approval_attempt" in r and "refused for want of a passkey" in r for r in rows)
    assert any(f"approved (approval {waiting['approval_id']})" in r and key.id in r for r in rows)
    assert "stop" in rows[-1]


def test_one_assertion_sent_many_times_at_once_approves_once(make_home: Any) -> None:
    # A double tap on the page, or a replay racing the real one, with an
    # authenticator whose count is always 0: each approve kept the assertion
    # through the same temporary file, and those that lost the race to rename
    # it answered audit_unavailable ("nothing was approved") while one ran.
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN, counter=False)
    enrol(home, key)
    for round_ in range(3):
        sock, waiting = pending(home, rid=20 + round_)
        shown = admin(home.admin, "approval",
                      {"approval_id": waiting["approval_id"]})["approval"]
        assertion = key.get(shown["challenge"])
        answers = _at_once(home, [{"v": 1, "id": i, "approve": {
            "approval_id": waiting["approval_id"], "assertion": assertion}} for i in range(6)])
        outcomes = sorted("ok" if "ok" in a else a["error"]["code"] for a in answers)
        assert outcomes == ["no_such_approval"] * 5 + ["ok"], answers
        assert next(read_frames(sock))["result"]["status"] == "ok"
        sock.close()
    approved = [r["approval"] for r in home.audit_lines() if "approval" in r]
    assert [r["verdict"] for r in approved] == ["approved"] * 3
    for record in approved:
        kept = home.audit / "assertions" / f"{record['passkey']['assertion_sha256']}.json"
        assert json.loads(kept.read_bytes())["id"] == key.id
    assert list((home.audit / "assertions").glob(".*")) == []
    assert proc.stop() == 0
