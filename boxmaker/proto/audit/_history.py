"""The calls of a verified audit log, as `bxctl grants replay|suggest` read them.

`HistoryReader` is fed the lines the chain verifier takes in (`ChainVerifier`'s
`on_line`: the line's bytes and its `LineFacts`), so the log is read once and
every line it looks at has passed the verifier's checks.  It pairs each `call`
record with its `decision` record and hands on one `HistoryCall` per decided
call, and one `HistoryApproval` per `approval` record.  Results, starts and the
other events are passed over.

A call line is taken apart by position, not parsed whole: a verified line has
exactly one form (`_audit`), where ``,"args":{`` can only begin the arguments
(a string value holds its quotes escaped) and the arguments end where the last
``,"peer":{"uid":`` begins.  The arguments stay the text they are stored as
(canonical JSON), which is also what a decision cache can key on.  Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import attrs

from .._taint import Label, Taint
from ._audit import scan_json
from ._audit_scan import LineFacts

MAX_PENDING: Final = 65_536
"""Calls waiting for their decision (brokerd writes both in one step: one or a few)."""

_TAINTS: Final[dict[tuple[str, bool], Taint]] = {
    (label, untrusted): Taint(label=label, untrusted=untrusted)
    for label in ("public", "private", "secret")
    for untrusted in (False, True)
}


class HistoryCall(NamedTuple):
    """One recorded call with its recorded decision.

    (A named tuple: one is made for each of a million calls.)"""

    seq: int
    """The call id."""
    ts: str
    session: str
    tool: str
    args_text: str
    """The arguments as stored: canonical, ASCII-only JSON."""
    outcome: str
    """`allowed`, `ask` or `denied:<code>` (07-bxctl "Grants against history")."""
    grant: str | None
    state: Taint
    """The taint the call was decided at."""

    def args(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.args_text)
        return value


@attrs.frozen(kw_only=True, slots=True)
class HistoryApproval:
    call: int
    verdict: str
    """`approved`, `refused`, `expired`, `requester_gone` or `abandoned`."""

    @property
    def approved(self) -> bool:
        return self.verdict == _APPROVED

    @property
    def refused(self) -> bool:
        """The owner said no (04-audit's `approval` verdict; a word of the record, which
        the denial code of the same spelling answers on the wire)."""
        return self.verdict == _REFUSED


OnCall = Callable[[HistoryCall], None]
OnApproval = Callable[[HistoryApproval], None]
OnLine = Callable[[bytes, LineFacts], None]
"""What takes the verifier's lines (`ChainVerifier`'s `on_line`), as `HistoryReader.feed`."""

_APPROVED: Final = "approved"
_REFUSED: Final = "refused"
_ARGS_START: Final = ',"args":{'
_PEER: Final = ',"peer":{"uid":'
_TOOL_START: Final = '","tool":'


class HistoryReader:
    """Feed verified lines; get decided calls and approvals, oldest first."""

    def __init__(self, on_call: OnCall, on_approval: OnApproval | None = None) -> None:
        self._on_call = on_call
        self._on_approval = on_approval
        self._pending: dict[int, tuple[str, str, str, str]] = {}
        self.undecided = 0
        """Calls dropped because too many waited for a decision at once."""

    def feed(self, content: bytes, facts: LineFacts) -> None:
        self.feed_parts(content, facts.key, facts.seq, facts.call)

    def feed_parts(self, content: bytes, key: str, seq: int, call: int | None) -> None:
        """`feed` with the facts the reader uses given one by one (its key, its seq and
        the call it names), as a worker process gets them."""
        if key == "call":
            self.feed_call(content, seq)
        elif key == "decision":
            assert call is not None
            self.feed_decision(content, call)
        elif key == "approval" and self._on_approval is not None:
            value: Any = scan_json(content.decode("ascii"), 0)[0]
            body = value["approval"]
            self._on_approval(HistoryApproval(call=body["call"], verdict=body["verdict"]))

    @property
    def pending(self) -> int:
        """Calls seen whose decision has not arrived (yet)."""
        return len(self._pending)

    def feed_call(self, content: bytes, seq: int) -> None:
        """A `call` line (`feed` with its key) and its seq."""
        text = content.decode("ascii")
        ts_at = text.index('"ts":"') + 6
        ts = text[ts_at : ts_at + 27]
        session_at = text.index('"call":{"session":"', ts_at) + 19
        session_end = text.index('"', session_at)
        session = text[session_at:session_end]
        tool_at = text.index(_TOOL_START, session_end) + len(_TOOL_START)
        args_at = text.index(_ARGS_START, tool_at)
        tool_json = text[tool_at:args_at]
        tool = json.loads(tool_json) if "\\" in tool_json else tool_json[1:-1]
        args_end = text.rindex(_PEER)
        args_text = text[args_at + len(_ARGS_START) - 1 : args_end]
        pending = self._pending
        if len(pending) >= MAX_PENDING:
            del pending[next(iter(pending))]
            self.undecided += 1
        pending[seq] = (ts, session, tool, args_text)

    def feed_decision(self, content: bytes, call: int) -> None:
        """A `decision` line (`feed` with its key) and the call it names."""
        entry = self._pending.pop(call, None)
        if entry is None:  # a second decision, or one whose call was dropped
            return
        # `{... "decision":{"call":N,"outcome":{TAG:{...}},"grant":G,"state":{"label":L,
        # "untrusted":B},"grants_digest":"hex"}}`: after the outcome (whose strings hold
        # their quotes escaped) the keys are fixed, so they are found from the end.
        text = content.decode("ascii")
        tag_at = text.index('"outcome":{"') + 12
        tag = text[tag_at : text.index('"', tag_at)]
        grant_at = text.rindex(',"grant":')
        state_at = text.index(',"state":{"label":"', grant_at)
        grant_text = text[grant_at + 9 : state_at]
        label_at = state_at + 19
        label_end = text.index('"', label_at)
        label: Label = text[label_at:label_end]  # type: ignore[assignment]
        untrusted = text.startswith('"untrusted":true', label_end + 2)
        if tag == "denied":
            code_at = text.index('"code":"', tag_at) + 8
            outcome = "denied:" + text[code_at : text.index('"', code_at)]
        else:
            outcome = tag
        ts, session, tool, args_text = entry
        grant = None if grant_text == "null" else grant_text[1:-1]
        self._on_call(HistoryCall(call, ts, session, tool, args_text, outcome, grant,
                                  _TAINTS[(label, untrusted)]))
