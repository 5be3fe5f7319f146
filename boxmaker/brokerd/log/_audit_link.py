"""Opening the audit log at start, and recomputing the session taints from it.

The writer's start-up (lock, verify, torn tail, accepted break) is
`_audit_startup.open_audit_log`; while it verifies, every accepted record is
fed to a `TaintCollector`, which recomputes every session's taint from the
`result` and `declassify` records (04-audit "Session state").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import attrs

from ..._audit_files import verify_directory
from ..._brokerd_config import BrokerdConfig
from ..._pin_choice import feed_pins
from ...proto._convert import U64
from ...proto._taint import Taint
from ...proto.audit import (
    ApprovalRecord,
    Break,
    Call,
    DecisionRecord,
    Declassify,
    McpPinRecord,
    McpServerRecord,
    OutcomeAsk,
    PasskeyRecord,
    Record,
    ResultRecord,
)
from ...proto.mcp import PinLedger
from .._state import TaintChange, rebuild
from ._audit_startup import StartupReport, open_audit_log
from ._audit_writer import AuditWriter, FsyncFn, WriteFn, thread_fsync


@attrs.frozen(kw_only=True)
class AuditStartup:
    writer: AuditWriter
    taints: dict[str, tuple[Taint, int]]
    known_sessions: list[str]
    head_seq: int | None
    report: StartupReport | None = None
    passkey_records: list[Record] = attrs.field(factory=list)
    """`passkey` records, and approvals and pins with a passkey: the credentials and
    sign counts (only those after the last accepted break)."""
    passkeys_dropped: bool = False
    """This start accepted a break and left out the credentials before it: enrol again."""
    abandoned: list[ApprovalRecord] = attrs.field(factory=list)
    """The asks pending when brokerd last stopped (a kill -9), closed at this start."""
    pins: PinLedger = attrs.field(factory=PinLedger)
    """Each MCP server's newest `mcp_pin` / `mcp_server drifted` record, split at the
    last accepted break (12 "Loading and checking a pin")."""


MAX_OPEN_ASKS: Final = 65_536
"""Asks in the log with no approval yet that start-up keeps track of (beyond: the oldest
are left open; brokerd never holds that many pending at once)."""


class TaintCollector:
    """Fed every verified record in order; keeps what the taints are made of."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self._sessions_of_calls: dict[int, str] = {}
        self.taints: dict[str, tuple[Taint, int]] = {}
        self.head_seq: int | None = None
        self.passkey_records: list[Record] = []
        self.open_asks: dict[int, int] = {}
        """call -> approval_id of an `ask` decision with no approval record yet"""
        self.pins = PinLedger()

    def __call__(self, record: Record) -> None:
        self.head_seq = record.seq
        event = record.event
        if isinstance(event, PasskeyRecord) or (
                isinstance(event, ApprovalRecord) and event.passkey is not None):
            self.passkey_records.append(record)
        elif isinstance(event, Break):
            # The records before an accepted break are not trusted for
            # credentials: a planted `passkey` record sits in the damage.
            self.passkey_records.clear()
            feed_pins(self.pins, record)
        elif isinstance(event, (McpPinRecord, McpServerRecord)):
            if isinstance(event, McpPinRecord) and event.passkey is not None:
                self.passkey_records.append(record)  # the credential's sign count
            feed_pins(self.pins, record)
        if isinstance(event, DecisionRecord) and isinstance(event.outcome, OutcomeAsk):
            asks = self.open_asks
            if len(asks) >= MAX_OPEN_ASKS:
                del asks[next(iter(asks))]
            asks[event.call] = event.outcome.approval_id
        elif isinstance(event, ApprovalRecord):
            self.open_asks.pop(event.call, None)
        if isinstance(event, Call):
            self._sessions_of_calls[record.seq] = event.session
            self.known.add(event.session)
        elif isinstance(event, ResultRecord):
            session = self._sessions_of_calls.pop(event.call, None)
            if session is not None:
                self._change(TaintChange(seq=record.seq, session=session, taint=event.state))
        elif isinstance(event, Declassify):
            self.known.add(event.session)
            self._change(TaintChange(seq=record.seq, session=event.session, taint=event.to,
                                     declassify=True))

    def _change(self, change: TaintChange) -> None:
        before = self.taints.get(change.session)
        merged = rebuild([TaintChange(seq=before[1], session=change.session, taint=before[0]),
                          change]) if before is not None else rebuild([change])
        if change.session in merged:
            self.taints[change.session] = merged[change.session]


def rebuild_from_log(directory: Path) -> tuple[dict[str, tuple[Taint, int]], list[str],
                                               int | None]:
    """(taints, known sessions, head seq) from the log as it is (brokerd rebuild-state)."""
    collector = TaintCollector()
    verify_directory(directory, on_record=collector)
    return collector.taints, sorted(collector.known), collector.head_seq


async def open_audit(config: BrokerdConfig, *, accept_break: bool, fsync: FsyncFn | None,
                     write: WriteFn = os.write) -> AuditStartup:
    """Start the writer (lock, verify, recover, break) and rebuild the taints.

    Raises AuditError (locked, chain broken, unavailable).
    """
    chosen: FsyncFn | None = (fsync or thread_fsync) if config.fsync else None
    collector = TaintCollector()
    writer, report = await open_audit_log(config.audit, accept_break=accept_break,
                                          by_uid=config.own_uid, fsync=chosen,
                                          on_record=collector, write=write)
    head = report.next_seq - 1 if report.next_seq > 0 else None
    dropped = False
    if report.break_record is not None:  # accepted now: the whole log before it
        dropped = bool(collector.passkey_records)
        collector(report.break_record)
    return AuditStartup(writer=writer, taints=collector.taints,
                        known_sessions=sorted(collector.known), head_seq=head, report=report,
                        passkey_records=collector.passkey_records,
                        passkeys_dropped=dropped, abandoned=_abandoned(collector.open_asks),
                        pins=collector.pins)


def _abandoned(open_asks: dict[int, int]) -> list[ApprovalRecord]:
    """The approval records that close the asks nobody answered before brokerd died."""
    return [ApprovalRecord(call=U64(call), approval_id=U64(approval_id), verdict="abandoned",
                           by=None, reason="brokerd stopped before the ask was answered",
                           redecision=None)
            for call, approval_id in sorted(open_asks.items())]
