"""What raised each session's taint, read from the audit log (11-approvals-web).

`TaintHistory` is fed the log's lines in order and keeps, per session, the
`result` records that raised its taint (and forgets them at a `declassify`):
the tool, the label and untrusted flag its output carried, the record's seq
and time.  `LogTail` reads only what was appended since the last look.  The
page shows these beside a pending call, so the owner sees why the session is
where it is.  Bounded: the newest `KEEP` causes of the newest `MAX_SESSIONS`.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import attrs

from .._state_files import open_regular
from ..proto._errors import DecodeError
from ..proto._taint import NEW_SESSION, Taint
from ..proto.audit import Call, Declassify, ResultRecord, is_day_file_name, parse_record

KEEP = 8
MAX_SESSIONS = 1024
MAX_CALLS = 4096
MAX_READ = 64 * 1024 * 1024


@attrs.frozen(kw_only=True)
class Cause:
    seq: int
    ts: str
    tool: str
    label: str
    untrusted: bool


class TaintHistory:
    def __init__(self) -> None:
        self._calls: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._taints: dict[str, Taint] = {}
        self.causes: OrderedDict[str, list[Cause]] = OrderedDict()

    def feed(self, line: bytes) -> None:
        try:
            record = parse_record(line)
        except DecodeError:
            return  # the verifier's business; nothing to show
        event = record.event
        if isinstance(event, Call):
            self._calls[record.seq] = (event.session, event.tool)
            while len(self._calls) > MAX_CALLS:
                self._calls.popitem(last=False)
        elif isinstance(event, ResultRecord):
            found = self._calls.pop(event.call, None)
            if found is None:
                return
            session, tool = found
            before = self._taints.get(session, NEW_SESSION)
            self._taints[session] = event.state
            if event.state != before:
                causes = self.causes.setdefault(session, [])
                causes.append(Cause(seq=record.seq, ts=record.ts, tool=tool, label=event.label,
                                    untrusted=event.untrusted))
                del causes[:-KEEP]
                self.causes.move_to_end(session)
                while len(self.causes) > MAX_SESSIONS:
                    self.causes.popitem(last=False)
        elif isinstance(event, Declassify):
            self._taints[event.session] = event.to
            self.causes.pop(event.session, None)

    def of(self, session: str) -> list[Cause]:
        return list(self.causes.get(session, ()))


class LogTail:
    """Feeds a TaintHistory what was appended to the day files since the last call."""

    def __init__(self, directory: Path, history: TaintHistory) -> None:
        self.directory = directory
        self.history = history
        self._offsets: dict[str, int] = {}
        self._partial = b""

    def poll(self) -> None:
        try:
            names = sorted(n for n in os.listdir(self.directory) if is_day_file_name(n))
        except OSError:
            return
        for name in names:
            offset = self._offsets.get(name, 0)
            try:
                with os.fdopen(open_regular(self.directory / name), "rb") as handle:
                    handle.seek(offset)
                    data = handle.read(MAX_READ)
            except OSError:
                continue
            if not data:
                continue
            lines = data.split(b"\n")
            complete, rest = lines[:-1], lines[-1]
            for line in complete:
                self.history.feed(line)
            self._offsets[name] = offset + len(data) - len(rest)
