"""What scripts/soak checks, at every brokerd restart and at the end.

- the chain verifies (recoveries only where brokerd was killed);
- every tool call a client saw answered by brokerd (a `tool_result`, or a
  `tool_denied` whose code brokerd gave) has its call and decision records,
  and a result with that status;
- no call has two approval records;
- no container of this brokerd is left, no process of the stack is left;
- every conversation file is readable (a torn last line only after a kill).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from boxmaker._audit_files import verify_directory
from boxmaker.loopd._conversations import Message
from boxmaker.proto import DecodeError, decode

# Denials that leave loopd without brokerd's answer: nothing to look for in the log.
NOT_FROM_BROKERD = {"broker_unavailable", "audit_unavailable"}


class Seen:
    """What the conversation clients saw, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[str, dict[str, Any]] = {}  # call_id -> tool, args
        self.answered: list[tuple[str, str, str]] = []  # call_id, "result"/"denied", status/code
        self.turns = {"started": 0, "done": 0, "error": 0, "broken": 0}
        self.started = time.monotonic()
        self.when: dict[str, float] = {}  # call_id -> seconds into the run it was answered

    def event(self, event: dict[str, Any]) -> None:
        with self.lock:
            if "tool_call" in event:
                body = event["tool_call"]
                self.calls[body["call_id"]] = {"tool": body["tool"], "args": body["args"]}
            elif "tool_result" in event:
                body = event["tool_result"]
                self.answered.append((body["call_id"], "result", body["status"]))
                self.when[body["call_id"]] = round(time.monotonic() - self.started, 2)
            elif "tool_denied" in event:
                body = event["tool_denied"]
                self.answered.append((body["call_id"], "denied", body["code"]))


def chain_ok(audit: Path) -> tuple[bool, dict[str, Any]]:
    report = verify_directory(audit)
    return report.ok, {"records": report.records, "recovered": len(report.recovered),
                       "failures": [f"{f.kind} {f.file}:{f.line}" for f in report.failures][:5]}


def records(audit: Path) -> list[dict[str, Any]]:
    out = []
    for name in sorted(os.listdir(audit)):
        if name.endswith(".jsonl"):
            for line in (audit / name).read_bytes().split(b"\n"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    return out


def check_answers(audit: Path, seen: Seen) -> dict[str, Any]:
    # What the clients saw is taken before the log is read: an answer that
    # arrives while the log is being read has records that may come after.
    with seen.lock:
        answered = list(seen.answered)
        calls = dict(seen.calls)
    by_args: dict[str, list[int]] = {}  # a call loopd sent twice has two records
    decisions: set[int] = set()
    results: dict[int, str] = {}
    approvals: dict[int, int] = {}
    for record in records(audit):
        if "call" in record and "session" in record["call"]:
            key = json.dumps([record["call"]["tool"], record["call"]["args"]], sort_keys=True)
            by_args.setdefault(key, []).append(record["seq"])
        elif "decision" in record:
            decisions.add(record["decision"]["call"])
        elif "result" in record:
            results[record["result"]["call"]] = record["result"]["status"]
        elif "approval" in record:
            call = record["approval"]["call"]
            approvals[call] = approvals.get(call, 0) + 1
    losses: list[str] = []
    checked = 0
    for call_id, kind, word in answered:
        if kind == "denied" and word in NOT_FROM_BROKERD:
            continue
        call = calls.get(call_id)
        if call is None:
            losses.append(f"{call_id}: answered without a tool_call event")
            continue
        seqs = by_args.get(json.dumps([call["tool"], call["args"]], sort_keys=True), [])
        checked += 1
        recorded = [seq for seq in seqs if seq in decisions]
        if not recorded:
            losses.append(f"{call_id}: answered {kind} {word} at {seen.when.get(call_id)} s "
                          f"but no call/decision record (calls {seqs})")
        elif kind == "result" and word not in {results.get(seq) for seq in recorded}:
            losses.append(f"{call_id}: answered {word} but the result records say "
                          f"{[results.get(seq) for seq in recorded]}")
        elif kind == "denied" and word == "runner_unavailable" and not any(
                seq in results for seq in recorded):
            losses.append(f"{call_id}: runner_unavailable without its result record")
    twice = sorted(call for call, count in approvals.items() if count > 1)
    return {"checked": checked, "losses": losses, "approvals_twice": twice}


def containers(prefix: str) -> list[str]:
    """podman's list of this brokerd's containers (podman can be slow on a shared host)."""
    return list(container_states(prefix))


def container_states(prefix: str) -> dict[str, str]:
    """name -> podman's status line ("Exited (0) 2 seconds ago", "Created", ...) of each
    container of this brokerd."""
    done = subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}\t{{.Status}}"],
                          capture_output=True, text=True, check=False, timeout=900)
    states = {}
    for line in done.stdout.splitlines():
        name, _, status = line.partition("\t")
        if name.startswith(prefix):
            states[name] = status.strip()
    return states


SETTLE_S = 10.0
"""How long a container's teardown may still be going on after brokerd has exited:
`podman rm --force` returns before its conmon is gone."""


def leftovers(prefix: str, *, podman: bool, settle_s: float = SETTLE_S) -> list[str]:
    """The containers and conmons still there once teardown had `settle_s` to finish."""
    deadline = time.monotonic() + settle_s
    while True:
        left = containers(prefix) if podman else []
        left += [n for n in conmons(prefix) if n not in left]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.5)


def describe_leftovers(prefix: str, names: list[str], *, podman: bool) -> list[str]:
    """Each leftover as "name: podman status; conmon pid N or gone", so that a report
    tells a container still being torn down from one that was lost."""
    states = container_states(prefix) if podman else {}
    monitors = conmons(prefix)
    out = []
    for name in names:
        status = states.get(name, "not in podman's list")
        monitor = f"conmon pid {monitors[name]}" if name in monitors else "no conmon"
        out.append(f"{name}: {status}; {monitor}")
    return out


def conmons(prefix: str) -> dict[str, int]:
    """name -> pid of every conmon (a running container's monitor) named with `prefix`.

    Read from /proc, so that finding a container to kill does not wait for
    podman's lock."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"conmon") or b"-n" not in argv:
            continue
        at = argv.index(b"-n") + 1
        name = argv[at].decode(errors="replace") if at < len(argv) else ""
        if name.startswith(prefix):
            out[name] = int(entry)
    return out


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(word) for word in text.split()]


def conversation_problems(directory: Path, *, torn_allowed: bool) -> tuple[int, list[str]]:
    problems = []
    files = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    for path in files:
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data) and not torn_allowed:
            problems.append(f"{path.name}: a torn last line")
        for number, line in enumerate(data[:end].splitlines(), 1):
            try:
                decode(line, Message)
            except DecodeError as exc:
                problems.append(f"{path.name}:{number}: {exc}")
    return len(files), problems
