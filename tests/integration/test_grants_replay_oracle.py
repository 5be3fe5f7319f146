"""`bxctl grants replay` against an independent oracle: a fresh brokerd (07-bxctl).

For random grant sets A and B and random calls at random taints (hypothesis):

1. the real brokerd, with grants A, decides the calls over its real sockets and
   writes the log;
2. `bxctl grants replay --grants B --json` re-decides that log;
3. a fresh brokerd, with grants B, decides every same call at the same taint;

and for every call, the outcome replay says it would now get is the one the
fresh brokerd gave it (with the grant, for the calls replay names as changed).

A session is put at a chosen taint the way an owner can: a state file that
does not parse makes brokerd take the session as secret + untrusted (fail
closed), and a `declassify` on admin.sock lowers it to the taint wanted.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tests.fakes.brokerd import (
    BXCTL,
    Home,
    admin,
    call_request,
    connect,
    env_for,
    frame,
    read_frames,
    start,
)

pytestmark = pytest.mark.slow

PROTECTED = "/data/protected"
EXTRA = f'[policy]\nprotected = ["{PROTECTED}"]\n'
PATHS = ["/data", "/data/a", "/data/a/b", "/data/c", "/data/protected/x"]
HOSTS = ["a.example.org", "*.example.org", "b.example.org:8443", "example.org"]
URLS = ["https://a.example.org/x", "https://b.example.org:8443/", "http://a.example.org/",
        "https://example.org/p?q=1", "https://c.d.example.org/", "https://10.0.0.1/"]
LABELS = ["public", "private", "secret"]
TAINTS = [(label, untrusted) for label in LABELS for untrusted in (False, True)]
STRICT = {"allow": 0, "ask": 1, "deny": 2}


@st.composite
def grant_text(draw: Any, index: int) -> str:
    tool = draw(st.sampled_from(["read_file", "list_dir", "write_file", "http_fetch", "echo"]))
    mode = draw(st.sampled_from(["allow", "ask", "deny"]))
    lines = ["[[grant]]", f'id = "g{index}"', f'tool = "{tool}"', f'mode = "{mode}"']
    if tool == "http_fetch":
        hosts = draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=2, unique=True))
        lines.append("hosts = " + json.dumps(hosts))
    elif tool != "echo":
        paths = draw(st.lists(st.sampled_from(PATHS[:4]), min_size=1, max_size=2, unique=True))
        lines.append("paths = " + json.dumps(paths))
    if mode != "deny":
        if tool != "write_file":
            lines.append(f'label = "{draw(st.sampled_from(LABELS))}"')
            lines.append(f"untrusted = {'true' if draw(st.booleans()) else 'false'}")
        lines.append(f'max_label = "{draw(st.sampled_from(LABELS))}"')
        stricter = [m for m in STRICT if STRICT[m] >= STRICT[mode]]
        lines.append(f'when_untrusted = "{draw(st.sampled_from(stricter))}"')
        if tool == "http_fetch" and draw(st.booleans()):
            lines.append("http = true")
    return "\n".join(lines) + "\n"


@st.composite
def grant_set(draw: Any) -> str:
    count = draw(st.integers(min_value=0, max_value=6))
    return "\n".join(draw(grant_text(i)) for i in range(count))


@st.composite
def a_call(draw: Any) -> tuple[str, dict[str, Any], tuple[str, bool], str]:
    tool = draw(st.sampled_from(["read_file", "list_dir", "write_file", "http_fetch", "echo",
                                 "no_such_tool"]))
    if tool in ("read_file", "list_dir"):
        args: dict[str, Any] = {"path": draw(st.sampled_from([*PATHS, "/data/a/", "rel"]))}
    elif tool == "write_file":
        args = {"path": draw(st.sampled_from(PATHS)), "content": "x\u001b[2J", "mode": "create"}
    elif tool == "http_fetch":
        args = {"url": draw(st.sampled_from(URLS))}
    elif tool == "echo":
        args = {"text": draw(st.sampled_from(["hi", "\u202eevil"]))}
    else:
        args = {"x": 1}
    taint = draw(st.sampled_from(TAINTS))
    answer = draw(st.sampled_from(["approve", "refuse", "leave"]))
    return tool, args, taint, answer


def at_taint(home: Home, session: str, taint: tuple[str, bool]) -> None:
    """Put a session nobody used yet at `taint` (fail closed, then declassify)."""
    sessions = home.state / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / f"{session}.json").write_text("not json")
    if taint != ("secret", True):
        answer = admin(home.admin, "declassify", {
            "session": session, "label": taint[0], "untrusted": taint[1], "reason": "test"})
        assert answer.get("ok") == {}, answer


def make_call(home: Home, session: str, tool: str, args: dict[str, Any], answer: str) -> None:
    sock = connect(home.broker)
    with sock:
        sock.sendall(frame(call_request(session, tool, args, 5)))
        frames = read_frames(sock)
        first = next(frames)
        if "pending" not in first:
            list(frames)
            return
        approval = first["pending"]["approval_id"]
        if answer == "leave":
            sock.shutdown(socket.SHUT_RDWR)
        else:
            body: dict[str, Any] = {"approval_id": approval}
            if answer == "refuse":
                body["reason"] = "no"
            admin(home.admin, answer, body)
        list(frames)


def decisions(home: Home) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """(call id, call, decision) in log order."""
    lines = home.audit_lines()
    calls = {r["seq"]: r["call"] for r in lines if "call" in r and "session" in r["call"]}
    out = []
    for record in lines:
        if "decision" in record:
            body = record["decision"]
            out.append((body["call"], calls[body["call"]], body))
    return out


def word(outcome: dict[str, Any]) -> str:
    ((tag, inner),) = outcome.items()
    return f"denied:{inner['code']}" if tag == "denied" else tag


def run_calls(grants: str, calls: list[Any], prefix: str) -> Home:
    home = Home(grants={"g.toml": grants}, extra=EXTRA, fsync=False)
    proc = start(home)
    try:
        for number, (tool, args, taint, answer) in enumerate(calls):
            session = f"{prefix}{number}"
            at_taint(home, session, taint)
            make_call(home, session, tool, args, answer)
    finally:
        assert proc.stop() == 0
    return home


@settings(max_examples=examples(8, at_least=3), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(grants_a=grant_set(), grants_b=grant_set(),
       calls=st.lists(a_call(), min_size=1, max_size=12))
def test_replay_equals_a_fresh_brokerd(grants_a: str, grants_b: str, calls: list[Any]) -> None:
    source = run_calls(grants_a, calls, "s")
    oracle: Home | None = None
    try:
        recorded = decisions(source)
        assert len(recorded) == len(calls)
        b_dir = source.root / "grants-b"
        b_dir.mkdir()
        (b_dir / "g.toml").write_text(grants_b)
        replay = subprocess.run(
            [str(BXCTL), "grants", "replay", "--grants", str(b_dir), "--audit",
             str(source.audit), "--json"],
            env=env_for(source), capture_output=True, text=True, timeout=60, check=False)
        doc = json.loads(replay.stdout)
        assert doc["verified"] is True and doc["calls"] == len(calls), replay.stderr
        changes = {c["call"]: c for c in doc["changes"]}
        oracle = run_calls(grants_b, calls, "o")
        fresh = decisions(oracle)
        widened = False
        for (call_id, call, was), (_, fresh_call, now) in zip(recorded, fresh, strict=True):
            assert (fresh_call["tool"], fresh_call["args"]) == (call["tool"], call["args"])
            assert now["state"] == was["state"]
            change = changes.pop(call_id, None)
            if change is None:
                assert word(now["outcome"]) == word(was["outcome"]), (call, was, now)
                continue
            assert change["was"] == {"outcome": word(was["outcome"]), "grant": was["grant"]}
            assert change["now"] == {"outcome": word(now["outcome"]), "grant": now["grant"]}
            assert change["now"]["outcome"] != change["was"]["outcome"]
            assert (change["tool"], change["args"], change["session"]) == (
                call["tool"], call["args"], call["session"])
            widened |= change["now"]["outcome"] == "allowed"
        assert not changes
        assert replay.returncode == (1 if widened else 0)
        matrix_total = sum(n for row in doc["matrix"].values() for n in row.values())
        assert matrix_total == len(calls)
    finally:
        source.cleanup()
        if oracle is not None:
            oracle.cleanup()


def test_declassify_puts_a_session_at_the_taint(tmp_path: Path) -> None:
    """The oracle's way of setting a taint works (else the test above proves little)."""
    calls = [("echo", {"text": "x"}, taint, "leave") for taint in TAINTS]
    home = run_calls('[[grant]]\nid = "e"\ntool = "echo"\nmode = "allow"\nmax_label = "secret"\n',
                     calls, "s")
    try:
        states = [(d["state"]["label"], d["state"]["untrusted"]) for _, _, d in decisions(home)]
        assert states == TAINTS
    finally:
        home.cleanup()
