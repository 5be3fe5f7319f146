"""brokerd's real process driven over its real sockets (05-brokerd, 09-operations)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.brokerd import (
    BXCTL,
    ECHO_GRANT,
    BrokerdProcess,
    Home,
    admin,
    call_request,
    connect,
    echo,
    env_for,
    frame,
    read_frames,
    request,
    start,
)

ECHO_ASK = """
[[grant]]
id = "echo-ask"
tool = "echo"
mode = "ask"
"""


@pytest.fixture
def make_home() -> Iterator[Any]:
    homes: list[Home] = []
    procs: list[BrokerdProcess] = []

    def make(pipe_stderr: bool = False, **kwargs: Any) -> tuple[Home, BrokerdProcess]:
        home = Home(**kwargs)
        homes.append(home)
        proc = start(home, pipe_stderr=pipe_stderr)
        procs.append(proc)
        return home, proc

    yield make
    for proc in procs:
        if proc.proc.poll() is None:
            proc.kill()
    for home in homes:
        home.cleanup()


def records_of_call(home: Home, call_id: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"call": [], "decision": [], "approval": [],
                                            "result": []}
    for record in home.audit_lines():
        for key, found in out.items():
            if key in record:
                body = record[key]
                if (key == "call" and record["seq"] == call_id) or (
                    key != "call" and body.get("call") == call_id
                ):
                    found.append(body)
    return out


def last_call_id(home: Home) -> int:
    return [r["seq"] for r in home.audit_lines() if "call" in r and isinstance(r["call"], dict)
            and "session" in r["call"]][-1]


def verify(home: Home) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)], env=env_for(home),
                          capture_output=True, text=True, timeout=60, check=False)


def test_allowed_echo_is_recorded_then_answered(make_home: Any) -> None:
    home, proc = make_home()
    frames = echo(home.broker, "hello", rid=7)
    assert frames == [{"id": 7, "result": {"status": "ok", "output": {"text": "hello"},
                                           "label": "public", "untrusted": False}}]
    recs = records_of_call(home, last_call_id(home))
    assert recs["call"][0]["tool"] == "echo"
    assert recs["decision"][0]["outcome"] == {"allowed": {}}
    assert recs["result"][0]["status"] == "ok"
    status = admin(home.admin, "status", {})["status"]
    assert status["audit"]["ok"] and status["grants"]["count"] == 1
    assert status["runner"] == {"kind": "echo", "ok": True, "image": None, "reason": None}
    assert any("one uid" in w for w in status["warnings"])
    assert proc.stop() == 0
    lines = home.audit_lines()
    assert "start" in lines[0] and lines[-1]["stop"] == {"reason": "shutdown"}
    assert proc.messages[-1] == "READY=1"


def test_every_denial_code_is_recorded(make_home: Any) -> None:
    grants = {
        "echo.toml": ECHO_GRANT.replace('mode = "allow"', 'mode = "allow"\nlabel = "private"'),
        "files.toml": "",
    }
    home, proc = make_home(grants=grants)
    outside = home.root / "outside"
    (home.grants / "files.toml").write_text(f"""
[[grant]]
id = "tree-read"
tool = "read_file"
mode = "allow"
paths = ["{home.root}"]

[[grant]]
id = "secret-deny"
tool = "read_file"
mode = "deny"
paths = ["{outside}/secret"]
""")
    cases = [
        ("s1", "no_such_tool", {"x": 1}, "unknown_tool"),
        ("s1", "echo", {"text": 5}, "bad_args"),
        ("s1", "read_file", {"path": "relative"}, "bad_args"),
        ("s1", "read_file", {"path": f"{home.audit}/x.jsonl"}, "protected"),
        ("s1", "list_dir", {"path": "/etc"}, "no_grant"),
        ("s1", "read_file", {"path": f"{outside}/secret/key"}, "denied_by_grant"),
    ]
    for number, (session, tool, args, code) in enumerate(cases, 1):
        frames = request(home.broker, call_request(session, tool, args, number))
        assert len(frames) == 1 and frames[0]["id"] == number, frames
        assert frames[0]["denied"]["code"] == code, frames
        decision = records_of_call(home, last_call_id(home))["decision"][0]
        assert decision["outcome"]["denied"]["code"] == code
    # An echo labelled private raises s2; then a public-only grant no longer applies.
    assert echo(home.broker, session="s2")[0]["result"]["label"] == "private"
    frames = request(home.broker, call_request("s2", "read_file", {"path": f"{outside}/a"}))
    assert frames[0]["denied"]["code"] == "taint"
    session = admin(home.admin, "session", {"session": "s2"})["session"]
    assert session["label"] == "private"
    # The grant set turns invalid while brokerd runs: recorded, every call denied.
    (home.grants / "broken.toml").write_text("[[grant]]\nid = 'x'\n")
    frames = echo(home.broker, session="s1")
    assert frames[0]["denied"]["code"] == "grants_invalid"
    assert frames[0]["denied"]["runbook"] == "docs/runbook.md#grants-invalid"
    changed = home.events("grants")
    assert changed[-1]["ok"] is False and changed[-1]["problem_count"] >= 1
    assert proc.stop() == 0


def test_grants_invalid_at_start_is_recorded(make_home: Any) -> None:
    home, proc = make_home(grants={"bad.toml": "this is not toml ["})
    frames = echo(home.broker)
    assert frames[0]["denied"]["code"] == "grants_invalid"
    start_record = home.events("start")[0]
    assert start_record["grants"]["ok"] is False
    report = admin(home.admin, "grants_check", {})["grants_report"]
    assert report["ok"] is False and report["problems"][0]["rule"] == "G1"
    assert proc.stop() == 0


def pending_call(home: Home, session: str = "s1") -> tuple[socket.socket, dict[str, Any]]:
    sock = connect(home.broker)
    sock.sendall(frame(call_request(session, "echo", {"text": "please"}, 11)))
    frames = read_frames(sock)
    first = next(frames)
    assert "pending" in first, first
    return sock, first["pending"]


def rest(sock: socket.socket) -> list[dict[str, Any]]:
    with sock:
        return list(read_frames(sock))


def test_ask_then_approve_runs_the_call(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK})
    sock, pending = pending_call(home)
    approval_id = pending["approval_id"]
    assert 100_000 <= approval_id <= 999_999 and pending["grant"] == "echo-ask"
    listed = admin(home.admin, "approvals", {})["approvals"]["items"]
    assert [a["approval_id"] for a in listed] == [approval_id]
    one = admin(home.admin, "approval", {"approval_id": approval_id})["approval"]
    assert one["tool"] == "echo" and one["args"] == {"text": "please"}
    assert admin(home.admin, "approve", {"approval_id": approval_id}) == {"id": 1, "ok": {}}
    assert rest(sock) == [{"id": 11, "result": {"status": "ok", "output": {"text": "please"},
                                                "label": "public", "untrusted": False}}]
    recs = records_of_call(home, one["call"])
    assert recs["approval"][0]["verdict"] == "approved"
    assert recs["approval"][0]["redecision"]["outcome"] == {"allowed": {}}
    assert recs["approval"][0]["by"] == os.getuid()
    assert recs["result"][0]["status"] == "ok"
    again = admin(home.admin, "approve", {"approval_id": approval_id})
    assert again["error"]["code"] == "no_such_approval"
    assert proc.stop() == 0


def test_ask_then_refuse(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK})
    sock, pending = pending_call(home)
    answer = admin(home.admin, "refuse", {"approval_id": pending["approval_id"],
                                          "reason": "not now"})
    assert answer == {"id": 1, "ok": {}}
    frames = rest(sock)
    assert frames[0]["denied"]["code"] == "refused" and "not now" in frames[0]["denied"]["reason"]
    approval = home.events("approval")[-1]
    assert approval["verdict"] == "refused" and approval["reason"] == "not now"
    assert not home.events("result")
    assert proc.stop() == 0


def test_ask_then_expire(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK}, ttl_ms=300)
    sock, _ = pending_call(home)
    frames = rest(sock)  # blocks until brokerd's own sweep expires it
    assert frames[0]["denied"]["code"] == "expired"
    approval = home.events("approval")[-1]
    assert approval["verdict"] == "expired" and approval["by"] is None
    assert admin(home.admin, "approvals", {})["approvals"]["items"] == []
    assert proc.stop() == 0


def test_two_approves_at_once_exactly_one_ok(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK})
    for _ in range(5):
        sock, pending = pending_call(home)
        answers: list[dict[str, Any]] = []
        barrier = threading.Barrier(2)

        def approve(verb: str, pending: dict[str, Any] = pending,
                    barrier: threading.Barrier = barrier,
                    answers: list[dict[str, Any]] = answers) -> None:
            body: dict[str, Any] = {"approval_id": pending["approval_id"]}
            if verb == "refuse":
                body["reason"] = None
            with connect(home.admin) as conn:
                barrier.wait()
                conn.sendall(frame({"v": 1, "id": 1, verb: body}))
                answers.extend(read_frames(conn))

        threads = [threading.Thread(target=approve, args=(verb,))
                   for verb in ("approve", "approve" if _ % 2 else "refuse")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        oks = [a for a in answers if "ok" in a]
        errors = [a for a in answers if "error" in a]
        assert len(oks) == 1 and len(errors) == 1, answers
        assert errors[0]["error"]["code"] == "no_such_approval"
        assert len(rest(sock)) == 1
    approvals = home.events("approval")
    assert len(approvals) == 5 and len({a["call"] for a in approvals}) == 5
    assert proc.stop() == 0


def test_approve_racing_expiry(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK}, ttl_ms=40)
    outcomes = set()
    for _ in range(12):
        sock, pending = pending_call(home)
        answer = admin(home.admin, "approve", {"approval_id": pending["approval_id"]})
        final = rest(sock)[0]
        if "ok" in answer:
            assert "result" in final
            outcomes.add("approved")
        else:
            assert answer["error"]["code"] == "no_such_approval"
            assert final["denied"]["code"] == "expired"
            outcomes.add("expired")
    by_call: dict[int, list[str]] = {}
    for approval in home.events("approval"):
        by_call.setdefault(approval["call"], []).append(approval["verdict"])
    assert len(by_call) == 12 and all(len(v) == 1 for v in by_call.values())
    assert outcomes  # whichever won, each approval was answered exactly once
    assert proc.stop() == 0


def test_grant_edited_while_waiting_is_changed(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK})
    sock, pending = pending_call(home)
    (home.grants / "ask.toml").write_text(ECHO_ASK.replace('mode = "ask"', 'mode = "deny"'))
    assert admin(home.admin, "approve", {"approval_id": pending["approval_id"]}) == {
        "id": 1, "ok": {}}
    frames = rest(sock)
    assert frames[0]["denied"]["code"] == "changed", frames
    approval = home.events("approval")[-1]
    assert approval["verdict"] == "approved"
    assert approval["redecision"]["outcome"]["denied"]["code"] == "changed"
    assert home.events("grants")  # the change of the set was recorded
    assert not home.events("result")
    assert proc.stop() == 0


def test_requester_closing_while_waiting_is_recorded(make_home: Any) -> None:
    home, proc = make_home(grants={"ask.toml": ECHO_ASK}, pipe_stderr=True)
    sock, pending = pending_call(home)
    sock.close()
    proc.read_until("the requester went away")  # brokerd notices the close on its own
    assert admin(home.admin, "approvals", {})["approvals"]["items"] == []
    approval = home.events("approval")[-1]
    assert approval["verdict"] == "requester_gone"
    assert approval["approval_id"] == pending["approval_id"]
    assert admin(home.admin, "approve", {"approval_id": pending["approval_id"]})["error"][
        "code"] == "no_such_approval"
    assert proc.stop() == 0


def test_bad_frames_are_answered_and_contained(make_home: Any) -> None:
    home, proc = make_home()
    cases: list[tuple[bytes, int | None, str]] = [
        (frame(b"not json"), None, "bad_frame"),
        (frame(b'{"v":1,"id":5,"call":{"session":"s1","tool":"echo","args":{},"x":1}}'), 5,
         "bad_frame"),
        (frame(b'{"v":1,"id":6,"id":6,"call":{}}'), None, "bad_frame"),
        (frame(b'{"v":2,"id":9,"call":{"session":"s1","tool":"echo","args":{}}}'), 9,
         "bad_version"),
        (struct.pack(">I", 9 * 1024 * 1024), None, "bad_frame"),
        (struct.pack(">I", 0), None, "bad_frame"),
    ]
    for data, rid, code in cases:
        with connect(home.broker) as sock:
            sock.sendall(data)
            frames = list(read_frames(sock))
        assert len(frames) == 1, frames
        assert frames[0]["id"] == rid and frames[0]["error"]["code"] == code, frames
        assert frames[0]["error"]["runbook"] == "docs/runbook.md#bad-frame"
    with connect(home.admin) as sock:
        sock.sendall(frame({"v": 1, "id": 3, "approve": {"approval_id": -1}}))
        assert next(read_frames(sock))["error"]["code"] == "bad_frame"
    assert echo(home.broker)[0]["result"]["status"] == "ok"
    assert not home.events("call")[:-1]  # bad frames never reach the decision path
    assert proc.stop() == 0


FORBIDDEN_CLIENT = """
import os, socket, struct, sys, json
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])
body = json.dumps({"v": 1, "id": 1, "status": {}}).encode()
s.sendall(struct.pack(">I", len(body)) + body)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data[4:].decode())
"""


def test_forbidden_peer_uid(make_home: Any) -> None:
    # Let another uid reach the sockets, so that SO_PEERCRED is the gate.
    extra = "broker_uids = [0, 61234]\nowner_uid = 0\n"
    home, proc = make_home(extra=extra)
    for directory in (home.root, home.home):
        os.chmod(directory, 0o711)
    assert (home.broker.stat().st_mode & 0o777) == 0o666
    assert (home.admin.stat().st_mode & 0o777) == 0o600
    assert (home.broker.parent.stat().st_mode & 0o777) == 0o711
    os.chmod(home.admin, 0o666)  # only to show that the uid check, not the mode, refuses
    for path in (home.broker, home.admin):
        out = subprocess.run(["/usr/bin/python3", "-c", FORBIDDEN_CLIENT, str(path)],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        answer = __import__("json").loads(out.stdout)
        assert answer["id"] is None and answer["error"]["code"] == "forbidden"
        assert answer["error"]["runbook"] == "docs/runbook.md#forbidden-peer"
    assert "uid 65534" in proc.log() and "forbidden-peer" in proc.log()
    assert not home.events("call")
    assert echo(home.broker)[0]["result"]["status"] == "ok"
    assert proc.stop() == 0


def test_second_brokerd_on_the_same_log_refuses(make_home: Any) -> None:
    home, proc = make_home()
    other = subprocess.run([str(Path(sys.executable).parent / "brokerd"), "serve", "--config",
                            str(home.config)], env=env_for(home), capture_output=True,
                           text=True, timeout=60, check=False)
    assert other.returncode == 1
    assert other.stderr.strip().endswith("docs/runbook.md#audit-locked")
    assert proc.stop() == 0


def test_bad_config_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "brokerd.toml"
    config.write_text("[approvals]\nttl_ms = 0\n")
    out = subprocess.run([str(Path(sys.executable).parent / "brokerd"), "serve", "--config",
                          str(config)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert "ttl_ms" in out.stderr
    assert out.stderr.strip().endswith("docs/runbook.md#brokerd-start-failed")


def test_grant_change_seen_by_status_is_recorded(make_home: Any) -> None:
    home, proc = make_home()
    (home.grants / "more.toml").write_text(
        '[[grant]]\nid = "etc-read"\ntool = "read_file"\nmode = "allow"\npaths = ["/etc"]\n')
    status = admin(home.admin, "status", {})["status"]
    assert status["grants"]["count"] == 2
    changed = home.events("grants")
    assert len(changed) == 1 and changed[0]["count"] == 2
    echo(home.broker)  # the next call does not record the same change again
    assert len(home.events("grants")) == 1
    assert proc.stop() == 0


def test_missing_grants_directory(make_home: Any) -> None:
    home = Home(grants={})
    home.grants.rmdir()
    proc = start(home)
    try:
        assert echo(home.broker)[0]["denied"]["code"] == "grants_invalid"
        assert home.events("start")[0]["grants"]["ok"] is False
        assert "grants-missing" in proc.log()
        home.grants.mkdir()
        (home.grants / "echo.toml").write_text(ECHO_GRANT)
        assert echo(home.broker)[0]["result"]["status"] == "ok"  # noticed on the next call
        assert home.events("grants")[-1]["ok"] is True
        assert proc.stop() == 0
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        home.cleanup()


def test_asks_pending_at_a_kill_9_are_closed_as_abandoned_at_start(make_home: Any) -> None:
    # issue 22 item 15: after a kill -9 the asks that were pending had no
    # approval record, so the log never said what became of them
    home, proc = make_home(grants={"ask.toml": ECHO_ASK})
    first, one = pending_call(home, "s1")
    second, two = pending_call(home, "s2")
    third, answered = pending_call(home, "s3")
    assert admin(home.admin, "refuse", {"approval_id": answered["approval_id"],
                                      "reason": "no"}) == \
        {"id": 1, "ok": {}}
    rest(third)
    asked = [last_call_id(home) - 4, last_call_id(home) - 2, last_call_id(home)]
    proc.kill()  # SIGKILL: no stop record, the two asks still open
    first.close()
    second.close()
    proc = start(home)
    try:
        for call_id, pending in zip(asked, (one, two, answered), strict=True):
            approvals = records_of_call(home, call_id)["approval"]
            if pending is answered:
                assert [a["verdict"] for a in approvals] == ["refused"]
                continue
            assert approvals == [{"call": call_id, "approval_id": pending["approval_id"],
                                  "verdict": "abandoned", "by": None,
                                  "reason": "brokerd stopped before the ask was answered",
                                  "redecision": None}]
        keys = [next(k for k in r if k not in ("seq", "ts", "prev")) for r in home.audit_lines()]
        assert keys[-3:] == ["start", "approval", "approval"]  # right after start
        assert admin(home.admin, "approvals", {})["approvals"]["items"] == []
        # a new ask after the restart, killed again: closed too, the old ones not again
        fourth, four = pending_call(home, "s4")
        proc.kill()
        fourth.close()
        proc = start(home)
        abandoned = [a for a in home.events("approval") if a["verdict"] == "abandoned"]
        assert [a["approval_id"] for a in abandoned] == [one["approval_id"],
                                                          two["approval_id"],
                                                          four["approval_id"]]
        # a clean stop leaves nothing open: the next start adds no approval
        assert proc.stop() == 0
        proc = start(home)
        assert len(home.events("approval")) == 4
        done = verify(home)
        assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("ok: "), \
            done.stdout
        report = subprocess.run([str(BXCTL), "audit", "verify", "--json", str(home.audit)],
                                env=env_for(home), capture_output=True, text=True,
                                timeout=60, check=False)
        assert '"unfinished_calls":[]' in report.stdout.replace(" ", ""), report.stdout
    finally:
        proc.stop()
