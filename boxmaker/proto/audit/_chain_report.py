"""The chain verifier's report (04-audit "Verifier"): what `ChainVerifier.finish` gives.

`ChainReport` and its parts, the `break` and `recovery` events that a report
calls for, and its JSON: exactly 04-audit's document (`report_json`, also the
converter's unstructure hook).  Pure.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .._convert import U64, register_unstructure_hook
from ._audit import GENESIS_PREV, Break, BreakFirst, FailureKind, Recovery

ReportKind = FailureKind | Literal["head_mismatch"]


@attrs.frozen(kw_only=True)
class Head:
    """The last record of the chain."""

    seq: int
    hash: str
    file: str
    line: int


@attrs.frozen(kw_only=True)
class Failure:
    """One failure.  `detail` (expected and found, in words) is not in the JSON."""

    kind: ReportKind
    file: str | None
    line: int | None
    seq: int | None
    expected: str | None
    found: str | None
    accepted: bool
    detail: str = attrs.field(eq=False)
    region: int = attrs.field(eq=False)
    """Broken regions are numbered from 1; failures of one region share it."""


@attrs.frozen(kw_only=True)
class AcceptedBreak:
    file: str
    line: int
    first: BreakFirst
    failures: int


@attrs.frozen(kw_only=True)
class Recovered:
    """A torn line closed off by the `recovery` record after it."""

    file: str
    line: int


@attrs.frozen(kw_only=True)
class TornTail:
    """The last line of the newest non-empty file, without ``\\n``."""

    file: str
    line: int
    bytes: int
    sha256: str = attrs.field(eq=False)
    """Of the torn bytes, for the `recovery` record (not in the JSON)."""


@attrs.frozen(kw_only=True)
class ChainReport:
    """What the verifier found; `unstructure` gives exactly 04-audit's JSON."""

    ok: bool
    files: int
    records: int
    head: Head | None
    failures: list[Failure]
    accepted_breaks: list[AcceptedBreak]
    recovered: list[Recovered]
    torn_tail: TornTail | None
    unfinished_calls: list[int]
    ignored_files: list[str]
    regions: int = attrs.field(eq=False)
    """How many separate broken regions the failures lie in (not in the JSON)."""
    break_seq: int = attrs.field(eq=False)
    break_prev: str = attrs.field(eq=False)
    """The seq and prev a `break` appended now at the end of the log must carry."""

    @property
    def unaccepted(self) -> list[Failure]:
        return [failure for failure in self.failures if not failure.accepted]

    def break_event(self, by: int) -> Break:
        """The `break` event that accepts every unaccepted failure (04-audit step 4)."""
        open_failures = [f for f in self.unaccepted if f.kind != "head_mismatch"]
        if not open_failures:
            raise ValueError("there is no failure to accept")
        first = open_failures[0]
        assert first.file is not None and first.line is not None
        assert first.kind != "head_mismatch"
        return Break(
            first=BreakFirst(file=first.file, line=U64(first.line), kind=first.kind),
            failures=U64(len(open_failures)),
            by=U64(by),
        )

    def recovery_event(self) -> Recovery | None:
        """The `recovery` event for the torn tail, if there is one (step 3)."""
        torn = self.torn_tail
        if torn is None:
            return None
        return Recovery(file=torn.file, line=U64(torn.line), bytes=U64(torn.bytes),
                        sha256=torn.sha256)

    @property
    def next_seq(self) -> int:
        """The seq of a record appended after the head (and after a recovery)."""
        return 0 if self.head is None else self.head.seq + 1

    @property
    def next_prev(self) -> str:
        return GENESIS_PREV if self.head is None else self.head.hash


def _failure_json(failure: Failure) -> dict[str, Any]:
    return {
        "kind": failure.kind,
        "file": failure.file,
        "line": failure.line,
        "seq": failure.seq,
        "expected": failure.expected,
        "found": failure.found,
        "accepted": failure.accepted,
    }


def report_json(report: ChainReport) -> dict[str, Any]:
    """The report as 04-audit's JSON document."""
    head = report.head
    torn = report.torn_tail
    return {
        "ok": report.ok,
        "files": report.files,
        "records": report.records,
        "head": None
        if head is None
        else {"seq": head.seq, "hash": head.hash, "file": head.file, "line": head.line},
        "failures": [_failure_json(f) for f in report.failures],
        "accepted_breaks": [
            {
                "file": b.file,
                "line": b.line,
                "first": {"file": b.first.file, "line": b.first.line, "kind": b.first.kind},
                "failures": b.failures,
            }
            for b in report.accepted_breaks
        ],
        "recovered": [{"file": r.file, "line": r.line} for r in report.recovered],
        "torn_tail": None
        if torn is None
        else {"file": torn.file, "line": torn.line, "bytes": torn.bytes},
        "unfinished_calls": list(report.unfinished_calls),
        "ignored_files": list(report.ignored_files),
    }


register_unstructure_hook(ChainReport, report_json)
register_unstructure_hook(Failure, _failure_json)
