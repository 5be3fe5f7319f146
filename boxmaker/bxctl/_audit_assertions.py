"""`bxctl audit verify`: every kept assertion checked against the call it approved
(issue 22 item 4, `_passkey_check`).

While the chain is verified, `KeptAssertions.feed` sees each record: the
`passkey` records give the enrolled public keys, the `call` and `decision`
records what the approval's challenge covers, each `approval` with a
`passkey` field one assertion to check.  `feed_line` does the same from the
verifier's lines and facts, and parses only the lines that can matter (issue
23): a call's line when an approval names it, an asking decision, a passkey
record, an approval with a passkey; the others are known by their key and
their one canonical form.  `check` then reads
`assertions/<assertion_sha256>.json` and its `.challenge.json` beside the log
and re-verifies the signature over the challenge rebuilt from the log.
An approval whose files are missing (kept before the sidecar existed, or
removed) cannot be re-verified: a failure, as a wrong signature is.

An `mcp_pin` record with a `passkey` is checked the same way (issue 26,
`_pin_assertion`): its kept assertion and sidecar, the credential the log
enrolled before it, the challenge recomputed from the record and the sidecar,
and a sign count that does not go back from the credential's previous use in
the log (an approval's or a pin's).
"""

from __future__ import annotations

import os
import stat
from itertools import compress, repeat
from pathlib import Path
from typing import Any

import attrs

from .._error_table import CONDITIONS
from .._passkey_check import MAX_SIDECAR, LoggedApproval, recheck
from .._pin_assertion import MAX_PIN_SIDECAR, LoggedPin, recheck_pin
from ..proto._escape import escape_line
from ..proto.audit import (
    ApprovalRecord,
    BlockFacts,
    Call,
    DecisionRecord,
    LineFacts,
    McpPinRecord,
    OutcomeAsk,
    PasskeyRecord,
    Record,
    parse_record,
)
from ..proto.wire import from_b64url

ASSERTIONS_DIR = "assertions"
CHALLENGE_SUFFIX = ".challenge.json"
MAX_KEPT = 256 * 1024
RUNBOOK = CONDITIONS["kept_assertion_failed"]


@attrs.frozen(kw_only=True)
class AssertionFinding:
    seq: int
    approval_id: int | None
    detail: str
    server: str | None = None
    """The pinned server, for an `mcp_pin` record's assertion (approval_id None)."""


@attrs.define
class AssertionReport:
    total: int = 0
    failures: list[AssertionFinding] = attrs.field(factory=list)


class KeptAssertions:
    def __init__(self) -> None:
        self._keys: dict[str, bytes] = {}
        self._calls: dict[int, Call] = {}
        self._call_lines: dict[int, bytes] = {}
        self._ask_lines: dict[int, list[bytes]] = {}
        self._asks: dict[tuple[int, int], str] = {}
        self.approvals: list[LoggedApproval] = []
        self.pins: list[LoggedPin] = []
        self._counts: dict[str, int] = {}
        """Each credential's sign count at its newest use in the log so far."""

    def feed(self, record: Record) -> None:
        event = record.event
        if isinstance(event, Call):
            self._calls[record.seq] = event
        elif isinstance(event, DecisionRecord) and isinstance(event.outcome, OutcomeAsk):
            self._asks[(event.call, event.outcome.approval_id)] = event.outcome.expires_at
        elif isinstance(event, PasskeyRecord):
            if event.action == "added":
                try:
                    self._keys[event.credential_id] = from_b64url(event.public_key)
                except ValueError:
                    self._keys.pop(event.credential_id, None)
            else:
                self._keys.pop(event.credential_id, None)
        elif isinstance(event, ApprovalRecord) and event.passkey is not None:
            self._approval(record.seq, event)
            self._counts[event.passkey.credential_id] = event.passkey.sign_count
        elif isinstance(event, McpPinRecord) and event.passkey is not None \
                and event.digest is not None:
            used = event.passkey
            self.pins.append(LoggedPin(
                seq=record.seq, server=event.server, digest=event.digest,
                credential_id=used.credential_id, sign_count=used.sign_count,
                assertion_sha256=used.assertion_sha256,
                public_key=self._keys.get(used.credential_id),
                previous_count=self._counts.get(used.credential_id)))
            self._counts[used.credential_id] = used.sign_count

    def feed_line(self, content: bytes, facts: LineFacts) -> None:
        """`feed` for a line the verifier took into the chain (its `on_line`).

        A record line has one form: an asking decision holds `{"ask":`, an
        approval with a passkey `"passkey":{` (a line that holds them and is
        not one is parsed and left as `feed` leaves it).  A passkey record and
        an approval with a passkey are parsed at once; a call's line and an
        asking decision's are kept by call and parsed, in their order, when an
        approval with a passkey names that call."""
        key = facts.key
        if key == "call":
            self._call_lines[facts.seq] = content
        elif key == "decision" and b'{"ask":' in content:
            assert facts.call is not None
            self._ask_lines.setdefault(facts.call, []).append(content)
        elif key == "passkey" or (key in ("approval", "mcp_pin")
                                  and b'"passkey":{' in content):
            self.feed(parse_record(content))

    def feed_block(self, lines: list[bytes], facts: BlockFacts, first: int) -> None:
        """`feed_line` for the lines the verifier took at once (its `on_block`): the
        same lines kept or parsed, found by key without a step per line where it can."""
        keys = facts.keys
        self._call_lines.update(compress(zip(range(first, first + len(lines)), lines, strict=True),
                                         facts.is_call))
        is_approval = list(map("approval".__eq__, keys))
        if not any(map(bytes.__contains__, compress(lines, is_approval),
                       repeat(b'"passkey":{'))):
            # each asking decision kept by its call, in order, as `feed_line` keeps it
            ask_lines = self._ask_lines
            for call, index in zip(facts.ask_calls, facts.asks, strict=True):
                ask_lines.setdefault(call, []).append(lines[index])
            return
        approvals = [index for index in compress(range(len(lines)), is_approval)
                     if b'"passkey":{' in lines[index]]
        call_of = dict(zip(facts.refs, facts.ref_calls, strict=True))
        for index in sorted([*facts.asks, *approvals]):
            self.feed_line(lines[index], LineFacts(first + index, facts.prevs[index],
                                                   keys[index], call_of[index], False))

    def _call(self, call: int) -> Call | None:
        found = self._calls.pop(call, None)
        if found is None:
            line = self._call_lines.pop(call, None)
            if line is not None:
                event = parse_record(line).event
                assert isinstance(event, Call)
                found = event
        return found

    def _approval(self, seq: int, event: ApprovalRecord) -> None:
        assert event.passkey is not None
        call = self._call(event.call)
        for line in self._ask_lines.pop(event.call, ()):
            self.feed(parse_record(line))
        expires_at = self._asks.pop((event.call, event.approval_id), None)
        used = event.passkey
        self.approvals.append(LoggedApproval(
            seq=seq, approval_id=event.approval_id, call=event.call,
            session=call.session if call else "", tool=call.tool if call else "",
            args=dict(call.args) if call else {}, expires_at=expires_at or "",
            credential_id=used.credential_id, sign_count=used.sign_count,
            assertion_sha256=used.assertion_sha256, public_key=self._keys.get(used.credential_id)))

    def check(self, audit_dir: Path) -> AssertionReport:
        """Read and re-verify each kept assertion.  Raises nothing: unreadable is a finding."""
        report = AssertionReport()
        for logged in self.approvals:
            base = audit_dir / ASSERTIONS_DIR / logged.assertion_sha256
            problem: str | None
            if not logged.session or not logged.expires_at:
                problem = "the log has no call record or no ask for this approval"
            else:
                try:
                    kept = _read(Path(f"{base}.json"), MAX_KEPT)
                    sidecar = _read(Path(f"{base}{CHALLENGE_SUFFIX}"), MAX_SIDECAR)
                except FileNotFoundError as exc:
                    problem = ("no challenge sidecar (kept before issue 22, or removed): "
                               "the assertion cannot be re-verified"
                               if str(exc.filename).endswith(CHALLENGE_SUFFIX)
                               else "the kept assertion is missing")
                except (OSError, ValueError) as exc:
                    problem = f"the kept assertion cannot be read: {exc}"
                else:
                    problem = recheck(logged, kept, sidecar)
            report.total += 1
            if problem is not None:
                report.failures.append(AssertionFinding(seq=logged.seq,
                                                        approval_id=logged.approval_id,
                                                        detail=problem))
        for pin in self.pins:
            report.total += 1
            problem = _pin_problem(audit_dir, pin)
            if problem is not None:
                report.failures.append(AssertionFinding(seq=pin.seq, approval_id=None,
                                                        detail=problem, server=pin.server))
        return report


def _pin_problem(audit_dir: Path, pin: LoggedPin) -> str | None:
    name = f"{ASSERTIONS_DIR}/{pin.assertion_sha256}"
    base = audit_dir / name
    try:
        kept = _read(Path(f"{base}.json"), MAX_KEPT)
    except FileNotFoundError:
        return f"the kept assertion {name}.json is missing (expected beside the log)"
    except (OSError, ValueError) as exc:
        return f"the kept assertion {name}.json cannot be read: {exc}"
    try:
        sidecar = _read(Path(f"{base}{CHALLENGE_SUFFIX}"), MAX_PIN_SIDECAR)
    except FileNotFoundError:
        return (f"no challenge sidecar {name}{CHALLENGE_SUFFIX} (kept before issue 26, or "
                "removed): the pin's assertion cannot be re-verified")
    except (OSError, ValueError) as exc:
        return f"the challenge sidecar {name}{CHALLENGE_SUFFIX} cannot be read: {exc}"
    return recheck_pin(pin, kept, sidecar)


def _read(path: Path, limit: int) -> bytes:
    """A regular file, not followed through a link, at most `limit` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        if info.st_size > limit:
            raise ValueError(f"{path.name} is over {limit} bytes")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"{path.name} is over {limit} bytes")
    return data


def report_lines(report: AssertionReport) -> list[str]:
    out = [f"FAILED: kept_assertion at seq {f.seq} ({_what(f)}): "
           f"{escape_line(f.detail)}. See {RUNBOOK}" for f in report.failures]
    if report.total:
        out.append(f"assertions: {report.total - len(report.failures)} of {report.total} "
                   "kept assertions re-verified against the calls they approved "
                   "and the pins they signed")
    return out


def _what(finding: AssertionFinding) -> str:
    if finding.approval_id is not None:
        return f"approval {finding.approval_id}"
    return f"mcp_pin of {escape_line(finding.server or '')}"


def as_json(report: AssertionReport) -> dict[str, Any]:
    return {"total": report.total,
            "failures": [{"seq": f.seq, "approval_id": f.approval_id, "server": f.server,
                          "detail": f.detail, "runbook": RUNBOOK}
                         for f in report.failures]}
