"""Build audit logs for tests, record by record, with the records module alone.

`LogBuilder` writes what 04-audit says the writer writes: records chained by
seq and prev, a torn last line, its `recovery` (steps 3), a `break` whose seq
and prev follow the line rule (step 4), garbage lines, other files.  The
break and recovery arithmetic here is written from the spec's words, not
taken from the verifier, so that the two check each other.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from boxmaker.proto._taint import Taint
from boxmaker.proto.audit._audit import (
    GENESIS_PREV,
    ApprovalRecord,
    BoundedCall,
    Break,
    BreakFirst,
    Call,
    DecisionRecord,
    Declassify,
    GrantsChanged,
    GrantsSummary,
    OmittedArgs,
    OutcomeAllowed,
    OutcomeAsk,
    OutcomeDenied,
    OutputDigest,
    Peer,
    Record,
    Recovery,
    Redecision,
    ResultRecord,
    Start,
    Stop,
    encode_record,
    line_hash,
)

PUBLIC = Taint(label="public", untrusted=False)
PRIVATE = Taint(label="private", untrusted=False)
DIGEST = "ab" * 32


class LogBuilder:
    """Lines grouped by file; `write` puts them in a directory."""

    def __init__(self, first_file: str = "2026-11-28.jsonl") -> None:
        self.files: dict[str, list[bytes]] = {first_file: []}
        self.current = first_file
        self.seq = -1  # of the last line that was a valid record
        self.last_record_hash = GENESIS_PREV
        self.lines_since_record = 0  # lines after the last valid record
        self.total_lines = 0
        self.micro = 0

    # -- plain records ------------------------------------------------------

    def ts(self) -> str:
        self.micro += 1
        second, micro = divmod(self.micro, 1_000_000)
        return f"{self.current[:10]}T07:00:{second % 60:02d}.{micro:06d}Z"

    def add(self, event: Any) -> int:
        """Append a record that follows the last valid record; returns its seq."""
        seq = self.seq + 1
        line = encode_record(Record(seq=seq, ts=self.ts(), prev=self.last_record_hash,
                                    event=event))
        self._append(line + b"\n", record=True, seq=seq)
        return seq

    def _append(self, raw: bytes, *, record: bool, seq: int = -1) -> None:
        self.files[self.current].append(raw)
        self.total_lines += 1
        if record:
            self.seq = seq
            self.last_record_hash = line_hash(raw)
            self.lines_since_record = 0
        else:
            self.lines_since_record += 1

    def new_file(self, name: str) -> None:
        self.files.setdefault(name, [])
        self.current = name

    def call(self, *, allowed: bool = True, result: bool = True, session: str = "s-1") -> int:
        """A call, its decision, and (when allowed and asked for) its result."""
        call = self.add(Call(session=session, tool="read_file",
                             args={"path": f"/home/me/notes/{self.seq}.md", "n": [1, {"b": 2}]},
                             peer=Peer(uid=1000, pid=4242)))
        outcome: Any = OutcomeAllowed() if allowed else OutcomeDenied(
            code="no_grant", reason="no grant covers it")
        self.add(DecisionRecord(call=call, outcome=outcome, grant="g" if allowed else None,
                                state=PUBLIC, grants_digest=DIGEST))
        if allowed and result:
            self.add(ResultRecord(call=call, status="ok", label="private", untrusted=False,
                                  state=PRIVATE, output=OutputDigest(sha256=DIGEST, bytes=812)))
        return call

    def ask(self) -> int:
        call = self.add(Call(session="s-2", tool="http_fetch",
                             args={"method": "GET", "url": "https://docs.python.org/3/"},
                             peer=Peer(uid=1000, pid=1)))
        self.add(DecisionRecord(call=call, outcome=OutcomeAsk(
            approval_id=482913, expires_at="2026-11-29T07:10:00.000000Z"), grant="docs",
            state=PUBLIC, grants_digest=DIGEST))
        return call

    def start(self) -> int:
        return self.add(Start(version="0.1.0", pid=4242,
                              grants=GrantsSummary(ok=True, count=3, digest=DIGEST)))

    def stop(self) -> int:
        return self.add(Stop(reason="SIGTERM"))

    # -- damage and its repair ------------------------------------------------

    def garbage(self, raw: bytes = b"this is not a record") -> None:
        self._append(raw + b"\n", record=False)

    def torn(self, raw: bytes | None = None) -> bytes:
        """A last line without its newline (what a crash mid-write leaves)."""
        if raw is None:
            raw = encode_record(Record(seq=self.seq + 1, ts=self.ts(),
                                       prev=self.last_record_hash, event=Stop(reason="x")))[:40]
        self.files[self.current].append(raw)
        return raw

    def recover(self) -> None:
        """04-audit start-up step 3: end the torn line, then a recovery record."""
        lines = self.files[self.current]
        raw = lines[-1]
        assert not raw.endswith(b"\n")
        lines[-1] = raw + b"\n"
        self.total_lines += 1
        self.lines_since_record += 1
        self.add(Recovery(file=self.current, line=len(lines), bytes=len(raw),
                          sha256=hashlib.sha256(raw).hexdigest()))

    def accept_break(self, first: tuple[str, int, str], failures: int, by: int = 1000) -> None:
        """04-audit start-up step 4, from the spec's words: seq counted from
        lines, prev the hash of the line just before, whatever it is."""
        seq = self.seq + self.lines_since_record + 1 if self.seq >= 0 else self.total_lines
        prev = GENESIS_PREV
        for name in reversed(sorted(self.files)):
            if self.files[name] and name <= self.current:
                prev = line_hash(self.files[name][-1])
                break
        event = Break(first=BreakFirst(file=first[0], line=first[1], kind=first[2]),  # type: ignore[arg-type]
                      failures=failures, by=by)
        line = encode_record(Record(seq=seq, ts=self.ts(), prev=prev, event=event))
        self._append(line + b"\n", record=True, seq=seq)

    def position(self) -> tuple[str, int]:
        """(file, 1-based line) of the next line of the current file."""
        return self.current, len(self.files[self.current]) + 1

    # -- output -----------------------------------------------------------------

    def data(self) -> dict[str, bytes]:
        return {name: b"".join(lines) for name, lines in self.files.items()}

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.data().items():
            (directory / name).write_bytes(data)
        return directory

    def head(self) -> tuple[int, str]:
        return self.seq, self.last_record_hash


def valid_log(calls: int = 5, *, files: int = 2) -> LogBuilder:
    """A small valid log: start, calls of every kind, spread over `files` days."""
    builder = LogBuilder("2026-11-01.jsonl")
    builder.start()
    for index in range(calls):
        if files > 1 and index == calls // 2:
            builder.new_file(f"2026-11-{index + 2:02d}.jsonl")
        builder.call(allowed=index % 3 != 1)
        if index == 1:
            builder.ask()
    builder.stop()
    return builder


def verify_data(data: dict[str, bytes], *, expect_head: tuple[int, str] | None = None,
                on_record: Any = None) -> Any:
    """Run the verifier over files given as bytes, the way the walker does."""
    from boxmaker.proto.audit._verify import ChainVerifier

    verifier = ChainVerifier(expect_head=expect_head, on_record=on_record)
    for name in sorted(data):
        if not verifier.begin_file(name):
            continue
        raw = data[name]
        parts = raw.split(b"\n")
        last = parts.pop()
        for part in parts:
            verifier.feed_line(part + b"\n")
        if last:
            verifier.feed_line(last)
        verifier.end_file()
    return verifier.finish()


# -- one record of every shape -------------------------------------------------

SECRET = Taint(label="secret", untrusted=True)
TS = "2026-11-29T07:00:00.000000Z"
HEX = "9f" * 32


def one_of_each() -> list[Any]:
    return [
        Start(version="0.1.0", pid=4242, grants=GrantsSummary(ok=True, count=3, digest=HEX)),
        Stop(reason="SIGTERM"),
        GrantsChanged(ok=False, count=2, digest=HEX, problem_count=1),
        Call(session="c-1", tool="http_fetch", args={"url": "https://x/", "method": "GET"},
             peer=Peer(uid=1000, pid=77)),
        DecisionRecord(call=3, outcome=OutcomeAllowed(), grant="g", state=PUBLIC,
                       grants_digest=HEX),
        DecisionRecord(call=3, outcome=OutcomeAsk(approval_id=482913, expires_at=TS),
                       grant="g", state=PUBLIC, grants_digest=HEX),
        DecisionRecord(call=3, outcome=OutcomeDenied(code="no_grant", reason="none"),
                       grant=None, state=SECRET, grants_digest=HEX),
        ApprovalRecord(call=3, approval_id=482913, verdict="approved", by=1000, reason=None,
                       redecision=Redecision(outcome=OutcomeAllowed(), grant="g", state=PUBLIC)),
        ApprovalRecord(call=3, approval_id=482913, verdict="refused", by=1000, reason="no",
                       redecision=None),
        ApprovalRecord(call=3, approval_id=482913, verdict="expired", by=None, reason=None,
                       redecision=None),
        ResultRecord(call=3, status="ok", label="private", untrusted=False, state=PUBLIC,
                     output=OutputDigest(sha256=HEX, bytes=812)),
        ResultRecord(call=3, status="runner_unavailable", label="public", untrusted=False,
                     state=PUBLIC, output=None),
        Declassify(session="c-1", from_=SECRET, to=PUBLIC, by=1000, reason="checked"),
        Recovery(file="2026-11-29.jsonl", line=14, bytes=37, sha256=HEX),
        Break(first=BreakFirst(file="2026-11-28.jsonl", line=77, kind="hash_mismatch"),
              failures=1, by=1000),
        BoundedCall(session="c-1", tool="http_fetch", args={"url": "https://x/"},
                    peer=Peer(uid=1000, pid=77), omitted=None),
        BoundedCall(session="c-1", tool="write_file", args={}, peer=Peer(uid=1000, pid=77),
                    omitted=OmittedArgs(bytes=20_971_520, sha256=HEX)),
    ]


def line_of(event: Any, **top: Any) -> bytes:
    """The line of `event` as record 1 (or the given seq, ts, prev)."""
    return encode_record(Record(seq=top.get("seq", 1), ts=top.get("ts", TS),
                                prev=top.get("prev", HEX), event=event))
