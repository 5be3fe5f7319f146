"""Passkey-signed approvals against the real brokerd over its sockets (11-approvals-web).

The owner's authenticator is `SoftAuthenticator` (the browser tests use
Chromium's); brokerd verifies with the `webauthn` package.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from boxmaker.proto.wire._wire_passkey import (
    approval_challenge,
    b64url,
    declassify_challenge,
    enrolment_challenge,
)
from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import (
    BXCTL,
    BrokerdProcess,
    Home,
    admin,
    call_request,
    connect,
    env_for,
    frame,
    read_frames,
    start,
)

ORIGIN = "http://localhost:8443"
ECHO_ASK = '[[grant]]\nid = "echo-ask"\ntool = "echo"\nmode = "ask"\n'
PASSKEYS = f'rp_id = "localhost"\norigins = ["{ORIGIN}"]\n'


@pytest.fixture
def make_home() -> Iterator[Any]:
    made: list[tuple[Home, BrokerdProcess]] = []

    def make(require: bool = True) -> tuple[Home, BrokerdProcess]:
        extra = PASSKEYS + ("require_passkey = true\n" if require else "")
        home = Home(grants={"ask.toml": ECHO_ASK}, approvals_extra=extra)
        proc = start(home)
        made.append((home, proc))
        return home, proc

    yield make
    for home, proc in made:
        if proc.proc.poll() is None:
            proc.kill()
        home.cleanup()


def pending(home: Home, rid: int = 11) -> tuple[socket.socket, dict[str, Any]]:
    sock = connect(home.broker)
    sock.sendall(frame(call_request("s1", "echo", {"text": "please"}, rid)))
    first = next(read_frames(sock))
    assert "pending" in first, first
    return sock, first["pending"]


def enrol(home: Home, key: SoftAuthenticator, name: str = "phone",
          signer: SoftAuthenticator | None = None) -> dict[str, Any]:
    link = admin(home.admin, "passkey_enrol", {"action": "add", "name": name,
                                                "credential_id": None})["enrolment"]
    assert link["url"] == f"{ORIGIN}/enrol#{link['token']}"
    options = admin(home.admin, "passkey_options", {"token": link["token"]})["passkey_options"]
    credential = key.create(options["creation"])
    assertion = None
    if signer is not None:
        assert options["assertion_challenge"] == b64url(enrolment_challenge(
            action="add", token=link["token"], name=name, credential_id=None))
        assertion = signer.get(options["assertion_challenge"])
    return admin(home.admin, "passkey_add", {"token": link["token"], "credential": credential,
                                             "assertion": assertion})


def approve(home: Home, approval_id: int, assertion: Any) -> dict[str, Any]:
    return admin(home.admin, "approve", {"approval_id": approval_id, "assertion": assertion})


def test_require_passkey_refuses_a_bare_approve_and_records_the_attempt(make_home: Any) -> None:
    home, proc = make_home()
    sock, waiting = pending(home)
    answer = approve(home, waiting["approval_id"], None)
    assert answer["error"]["code"] == "passkey_required"
    assert answer["error"]["runbook"] == "docs/runbook.md#passkey-required"
    attempts = [{k: v for k, v in r.items() if k != "seq"}
                for r in home.events("approval_attempt")]
    assert attempts == [{"approval_id": waiting["approval_id"], "by": os.getuid(),
                         "reason": answer["error"]["message"]}]
    # bxctl says so, and how to approve instead; the approval stays pending.
    run = subprocess.run([str(BXCTL), "--admin-socket", str(home.admin), "approve",
                          str(waiting["approval_id"])], env=env_for(home), capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 1 and "approval page" in run.stderr, run.stderr
    listed = admin(home.admin, "approvals", {})["approvals"]["items"]
    assert [a["approval_id"] for a in listed] == [waiting["approval_id"]]
    # Refusing needs no passkey.
    assert admin(home.admin, "refuse", {"approval_id": waiting["approval_id"],
                                        "reason": None}) == {"id": 1, "ok": {}}
    assert next(read_frames(sock))["denied"]["code"] == "refused"
    sock.close()
    assert proc.stop() == 0


def test_an_enrolled_passkey_approves_exactly_its_call(make_home: Any) -> None:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    assert enrol(home, key) == {"id": 1, "ok": {}}
    added = home.events("passkey")
    assert [(r["action"], r["credential_id"], r["name"]) for r in added] == [
        ("added", key.id, "phone")]
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    decision = [r for r in home.audit_lines() if "decision" in r][-1]
    # The challenge covers exactly this call (its nonce is brokerd's own secret).
    assert shown["call"] == decision["decision"]["call"]
    forged = approval_challenge(approval_id=shown["approval_id"], call=shown["call"],
                                session="s1", tool="echo", args={"text": "please"},
                                expires_at=shown["expires_at"], nonce="0" * 32)
    assert b64url(forged) != shown["challenge"]
    # A second pending call: its assertion does not approve the first.
    other_sock, other = pending(home, rid=12)
    other_view = admin(home.admin, "approval", {"approval_id": other["approval_id"]})["approval"]
    wrong = approve(home, waiting["approval_id"], key.get(other_view["challenge"]))
    assert wrong["error"]["code"] == "passkey_required"
    assert "challenge" in wrong["error"]["message"]
    # The right one runs the call, and the record carries the credential.
    good = key.get(shown["challenge"])
    assert approve(home, waiting["approval_id"], good) == {"id": 1, "ok": {}}
    assert next(read_frames(sock))["result"]["status"] == "ok"
    record = [r["approval"] for r in home.audit_lines() if "approval" in r][-1]
    assert record["verdict"] == "approved"
    assert record["passkey"]["credential_id"] == key.id
    assert record["passkey"]["sign_count"] == key.sign_count
    kept = home.audit / "assertions" / f"{record['passkey']['assertion_sha256']}.json"
    assert json.loads(kept.read_bytes())["response"]["signature"] == good["signature"]
    # Replayed: for the answered approval, and for the other one.
    assert approve(home, waiting["approval_id"], good)["error"]["code"] == "no_such_approval"
    assert approve(home, other["approval_id"], good)["error"]["code"] == "passkey_required"
    reasons = [r["reason"] for r in home.events("approval_attempt")]
    assert len(reasons) == 2
    sock.close()
    other_sock.close()
    assert proc.stop() == 0
    run = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)], env=env_for(home),
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_credentials_come_from_the_log_across_a_restart(make_home: Any) -> None:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    assert approve(home, waiting["approval_id"], key.get(shown["challenge"]))["ok"] == {}
    sock.close()
    assert proc.stop() == 0
    proc = start(home)
    listed = admin(home.admin, "passkeys", {})["passkeys"]
    assert [(p["credential_id"], p["name"], p["sign_count"]) for p in listed["items"]] == [
        (key.id, "phone", 2)]
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    # The count of the approval in the log is known after the restart: one that
    # went backwards (a cloned authenticator) is refused.
    key.sign_count = 1
    key.counter = False
    stale = approve(home, waiting["approval_id"], key.get(shown["challenge"]))
    assert stale["error"]["code"] == "passkey_required" and "sign count" in stale["error"][
        "message"]
    sock.close()
    assert proc.stop() == 0


def test_a_second_passkey_needs_the_first(make_home: Any) -> None:
    home, proc = make_home()
    first = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    second = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, first)
    unsigned = enrol(home, second, name="laptop")
    assert unsigned["error"]["code"] == "passkey_required"
    assert enrol(home, second, name="laptop", signer=first) == {"id": 1, "ok": {}}
    # Removal, signed by the credential that stays.
    link = admin(home.admin, "passkey_enrol", {"action": "remove", "name": None,
                                                "credential_id": second.id})["enrolment"]
    options = admin(home.admin, "passkey_options", {"token": link["token"]})["passkey_options"]
    assert options["creation"] is None
    done = admin(home.admin, "passkey_remove", {
        "token": link["token"], "assertion": first.get(options["assertion_challenge"])})
    assert done == {"id": 1, "ok": {}}
    # The link was used once.
    again = admin(home.admin, "passkey_options", {"token": link["token"]})
    assert again["error"]["code"] == "no_such_passkey"
    names = [p["name"] for p in admin(home.admin, "passkeys", {})["passkeys"]["items"]]
    assert names == ["phone"]
    assert [r["action"] for r in home.events("passkey")] == ["added", "added", "removed"]
    assert proc.stop() == 0


def test_a_wrong_origin_or_rp_id_is_refused(make_home: Any) -> None:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    sock, waiting = pending(home)
    shown = admin(home.admin, "approval", {"approval_id": waiting["approval_id"]})["approval"]
    evil = approve(home, waiting["approval_id"],
                   key.get(shown["challenge"], origin="http://localhost:9999"))
    assert evil["error"]["code"] == "passkey_required" and "origin" in evil["error"]["message"]
    other_rp = approve(home, waiting["approval_id"],
                       key.get(shown["challenge"], rp_id="evil.example"))
    assert other_rp["error"]["code"] == "passkey_required"
    no_uv = SoftAuthenticator(rp_id="localhost", origin=ORIGIN, user_verified=False)
    no_uv.key, no_uv.credential_id = key.key, key.credential_id
    no_uv.sign_count = key.sign_count
    unverified = approve(home, waiting["approval_id"], no_uv.get(shown["challenge"]))
    assert unverified["error"]["code"] == "passkey_required"
    assert "verif" in unverified["error"]["message"]
    sock.close()
    assert proc.stop() == 0


def test_declassify_under_require_passkey(make_home: Any) -> None:
    home, proc = make_home()
    key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    enrol(home, key)
    # A session that brokerd has seen, raised by nothing (seq 0).
    sock, waiting = pending(home)
    admin(home.admin, "refuse", {"approval_id": waiting["approval_id"], "reason": None})
    sock.close()
    body = {"session": "s1", "label": "public", "untrusted": False, "reason": "checked"}
    bare = admin(home.admin, "declassify", body)
    assert bare["error"]["code"] == "passkey_required"
    seq = admin(home.admin, "session", {"session": "s1"})["session"]["seq"]
    signed = key.get(declassify_challenge(seq=seq, **body))
    assert admin(home.admin, "declassify", {**body, "assertion": signed}) == {"id": 1, "ok": {}}
    assert home.events("declassify")[-1]["reason"] == "checked"
    assert proc.stop() == 0


def test_without_require_passkey_a_bare_approve_still_works(make_home: Any) -> None:
    home, proc = make_home(require=False)
    sock, waiting = pending(home)
    assert approve(home, waiting["approval_id"], None) == {"id": 1, "ok": {}}
    assert next(read_frames(sock))["result"]["status"] == "ok"
    record = [r["approval"] for r in home.audit_lines() if "approval" in r][-1]
    assert "passkey" not in record  # written as older records were
    sock.close()
    assert proc.stop() == 0
