"""The week of calls of docs/grants.md's "week" example, as brokerd records them.

Each call is decided by the policy's `decide` with the example's grants at its
session's taint (the taint rises after every call that ran, by the result
taint of its decision), and recorded with the project's record encoder in
brokerd's order: `call`, `decision`, then `approval` for an ask (the owner's
verdict is part of the script), then `result` for a call that ran.  One day
file per day, 2026-11-23 to 2026-11-29.  Deterministic, so that the doc can
show what bxctl prints.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from boxmaker.policy._decide import decide
from boxmaker.policy._decision import Ask, ProtectedPaths, ToolCall
from boxmaker.policy._model import GrantSet
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.audit._audit import (
    GENESIS_PREV,
    ApprovalRecord,
    Call,
    DecisionRecord,
    GrantsSummary,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    OutputDigest,
    Peer,
    Record,
    Redecision,
    ResultRecord,
    Start,
    Stop,
    encode_record,
)

HOME = "/home/me/.local/share/boxmaker"
DOCS = "https://docs.python.org/3/library/"

# (day, hh:mm, session, tool, args, verdict for an ask)
WEEK: list[tuple[int, str, str, str, dict[str, Any], str | None]] = [
    (23, "09:12", "c-1123-a", "read_file", {"path": "/home/me/notes/todo.md"}, None),
    (23, "09:14", "c-1123-a", "http_fetch", {"url": DOCS + "asyncio.html"}, "approved"),
    (23, "09:20", "c-1123-a", "read_file",
     {"path": "/home/me/projects/boxmaker/README.md"}, None),
    (24, "10:02", "c-1124-a", "http_fetch", {"url": DOCS + "ssl.html"}, "approved"),
    (24, "10:05", "c-1124-a", "http_fetch", {"url": "https://pypi.org/simple/trio/"}, None),
    (24, "10:30", "c-1124-b", "read_file", {"path": "/home/me/.ssh/id_ed25519"}, None),
    (25, "14:41", "c-1125-a", "read_file",
     {"path": "/home/me/projects/boxmaker/NOTES.md"}, None),
    (25, "14:43", "c-1125-a", "write_file",
     {"path": "/home/me/notes/inbox/idea.md", "content": "try trio", "mode": "create"},
     "approved"),
    (26, "08:55", "c-1126-a", "http_fetch", {"url": DOCS + "pathlib.html"}, "approved"),
    (26, "09:01", "c-1126-a", "list_dir", {"path": HOME + "/audit"}, None),
    (27, "16:20", "c-1127-a", "write_file",
     {"path": "/home/me/notes/inbox/link.md", "content": "\u001b]8;;evil\u0007",
      "mode": "create"}, "refused"),
    (27, "16:22", "c-1127-a", "http_fetch", {"url": "https://pypi.org/simple/h11/"}, None),
    (28, "11:11", "c-1128-a", "read_file", {"path": "/home/me/notes/plan.md"}, None),
    (28, "11:12", "c-1128-a", "http_fetch", {"url": DOCS + "json.html"}, "approved"),
    (29, "07:30", "c-1129-a", "write_file",
     {"path": "/home/me/drafts/post.md", "content": "draft", "mode": "create"}, None),
    (29, "07:31", "c-1129-a", "http_fetch", {"url": DOCS + "os.html"}, "approved"),
]


class _Writer:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.seq = 0
        self.prev = GENESIS_PREV
        self.micro = 0

    def add(self, day: int, clock: str, event: Any) -> int:
        self.micro += 1000
        ts = f"2026-11-{day:02d}T{clock}:00.{self.micro % 1_000_000:06d}Z"
        line = encode_record(Record(seq=self.seq, ts=ts, prev=self.prev, event=event))
        with open(self.directory / f"2026-11-{day:02d}.jsonl", "ab") as stream:
            stream.write(line + b"\n")
        self.prev = hashlib.sha256(line).hexdigest()
        self.seq += 1
        return self.seq - 1


def write_week(directory: Path, grants: GrantSet) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    writer = _Writer(directory)
    protected = ProtectedPaths.of([HOME])
    taints: dict[str, Taint] = {}
    summary = GrantsSummary(ok=True, count=len(grants.grants), digest=grants.digest)
    writer.add(23, "08:00", Start(version="0.1.0", pid=812, grants=summary))
    for number, (day, clock, session, tool, args, verdict) in enumerate(WEEK):
        taint = taints.get(session, NEW_SESSION)
        result = decide(ToolCall(tool=tool, args=args), taint, grants, protected)
        call = writer.add(day, clock, Call(session=session, tool=tool, args=args,
                                           peer=Peer(uid=1000, pid=900)))
        runs = False
        if isinstance(result, Ask):
            approval = 400_100 + number
            writer.add(day, clock, DecisionRecord(
                call=call, outcome=OutcomeAsk(approval_id=approval,
                                              expires_at=f"2026-11-{day:02d}T23:59:00.000000Z"),
                grant=result.grant, state=taint, grants_digest=grants.digest))
            assert verdict is not None
            redecision = None
            if verdict == "approved":
                redecision = Redecision(outcome=OutcomeAllowed(), grant=result.grant, state=taint)
            writer.add(day, clock, ApprovalRecord(
                call=call, approval_id=approval, verdict=verdict,  # type: ignore[arg-type]
                by=1000, reason="not that link" if verdict == "refused" else None,
                redecision=redecision))
            runs = verdict == "approved"
        elif result.allowed:
            writer.add(day, clock, DecisionRecord(call=call, outcome=OutcomeAllowed(),
                                                  grant=result.grant, state=taint,
                                                  grants_digest=grants.digest))
            runs = True
        else:
            assert result.code is not None
            writer.add(day, clock, DecisionRecord(
                call=call, outcome=OutcomeDenied(code=result.code, reason=result.reason),
                grant=result.grant, state=taint, grants_digest=grants.digest))
        if runs:
            label = result.label or "public"
            untrusted = bool(result.untrusted)
            taints[session] = after = taint.raised_by(label, untrusted)
            writer.add(day, clock, ResultRecord(
                call=call, status="ok", label=label, untrusted=untrusted, state=after,
                output=OutputDigest(sha256="5e" * 32, bytes=1200 + number)))
    writer.add(29, "18:00", Stop(reason="shutdown"))
