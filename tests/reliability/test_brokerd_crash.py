"""Crash: SIGKILL the real brokerd at random points under load, many times (09-operations).

After every kill brokerd restarts (closing off a torn tail), and in the end:
the chain verifies; every call a client saw answered has its call and decision
records (and a result when it was answered a result); every approval a client
saw approved has exactly one approval record, and no approval id is answered
twice.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from boxmaker._audit_files import verify_directory
from tests.fakes.brokerd import (
    BXCTL,
    ECHO_GRANT,
    Home,
    admin,
    call_request,
    connect,
    env_for,
    frame,
    read_frames,
    request,
    start,
)

KILLS = 50
WORKERS = 3


def ask_grant(root: Path) -> str:
    return f"""
[[grant]]
id = "notes-ask"
tool = "read_file"
mode = "ask"
paths = ["{root}/notes"]
"""


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered: list[tuple[str, str]] = []
        """(text, kind) of every echo call that got a final answer."""
        self.approved: list[int] = []
        """approval ids whose approve was answered ok."""
        self.pending_answered: list[tuple[int, str]] = []


def echo_worker(home: Home, tag: str, seen: Seen, stop: threading.Event) -> None:
    number = 0
    while not stop.is_set():
        text = f"{tag}-{number}"
        number += 1
        try:
            frames = request(home.broker, call_request(f"s{number % 3}", "echo",
                                                       {"text": text}), timeout=20)
        except OSError:
            return
        if not frames:
            return
        kind = next(iter(k for k in frames[-1] if k != "id"))
        with seen.lock:
            seen.answered.append((text, kind))


def approve_worker(home: Home, tag: str, seen: Seen, stop: threading.Event) -> None:
    number = 0
    while not stop.is_set():
        number += 1
        try:
            with connect(home.broker, timeout=20) as sock:
                sock.sendall(frame(call_request("s9", "read_file",
                                                {"path": f"{home.root}/notes/{tag}-{number}"})))
                frames = read_frames(sock)
                first = next(frames, None)
                if first is None or "pending" not in first:
                    return
                approval_id = first["pending"]["approval_id"]
                answer = admin(home.admin, "approve", {"approval_id": approval_id})
                if "ok" in answer:
                    with seen.lock:
                        seen.approved.append(approval_id)
                final = next(frames, None)
                if final is not None:
                    with seen.lock:
                        seen.pending_answered.append((approval_id, next(
                            k for k in final if k != "id")))
        except (OSError, AssertionError, StopIteration):
            return


def records(home: Home) -> list[dict[str, Any]]:
    out = []
    for name in sorted(os.listdir(home.audit)):
        if not name.endswith(".jsonl"):
            continue
        for line in (home.audit / name).read_bytes().split(b"\n"):
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a torn tail, closed off by the next start's recovery
    return out


@pytest.mark.slow
def test_sigkill_at_random_points() -> None:
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    home = Home(grants={"echo.toml": ECHO_GRANT, "ask.toml": ask_grant(Path("/srv"))})
    (home.grants / "ask.toml").write_text(ask_grant(home.root))
    seen = Seen()
    try:
        for round_number in range(KILLS):
            proc = start(home)
            stop = threading.Event()
            threads = [threading.Thread(target=echo_worker, args=(home, f"r{round_number}w{i}",
                                                                  seen, stop))
                       for i in range(WORKERS)]
            threads.append(threading.Thread(target=approve_worker,
                                            args=(home, f"r{round_number}a", seen, stop)))
            for thread in threads:
                thread.start()
            stop.wait(rng.uniform(0.01, 0.25))  # a random point of the load
            proc.kill()
            stop.set()
            for thread in threads:
                thread.join(60)
                assert not thread.is_alive()
        # A last start recovers whatever the last kill tore, and stops cleanly.
        proc = start(home)
        assert proc.stop() == 0
        report = verify_directory(home.audit)
        assert report.ok, report
        out = subprocess.run([str(BXCTL), "audit", "verify", str(home.audit)],
                             env=env_for(home), capture_output=True, text=True, timeout=120,
                             check=False)
        if "No such command" not in out.stderr:
            assert out.returncode == 0, out.stdout + out.stderr

        everything = records(home)
        calls_by_text: dict[str, int] = {}
        decisions: dict[int, dict[str, Any]] = {}
        results: dict[int, dict[str, Any]] = {}
        approvals: dict[int, list[dict[str, Any]]] = {}
        for record in everything:
            if "call" in record and "session" in record["call"]:
                text = record["call"]["args"].get("text")
                if text is not None:
                    calls_by_text[text] = record["seq"]
            elif "decision" in record:
                decisions[record["decision"]["call"]] = record["decision"]
            elif "result" in record:
                results[record["result"]["call"]] = record["result"]
            elif "approval" in record:
                # Approval ids are unique while one brokerd runs, not across restarts:
                # a call is what is answered once.
                approvals.setdefault(record["approval"]["call"], []).append(record["approval"])
        assert len(seen.answered) > KILLS  # there was load
        for text, kind in seen.answered:
            call_id = calls_by_text.get(text)
            assert call_id is not None, f"answered {kind} for {text} but no call record"
            assert call_id in decisions, f"answered {text} without a decision record"
            if kind == "result":
                assert results[call_id]["status"] == "ok"
        assert all(len(v) == 1 for v in approvals.values()), "an approval answered twice"
        verdicts = {(a[0]["approval_id"], a[0]["verdict"]) for a in approvals.values()}
        for approval_id in seen.approved:
            assert (approval_id, "approved") in verdicts
        answered_ids = {approval_id for approval_id, _ in verdicts}
        for approval_id, kind in seen.pending_answered:
            assert approval_id in answered_ids
            assert kind in ("error", "denied", "result")
    finally:
        home.cleanup()
