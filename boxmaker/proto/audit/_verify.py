"""The chain verifier (04-audit "Verifier"): pure and line-at-a-time.

Feed it the day files in name order::

    verifier = ChainVerifier(expect_head=None)
    for name in sorted(names):
        if verifier.begin_file(name):      # False: not a day file, listed as ignored
            for line in lines_of(name):    # each line with its b"\\n", if it has one
                verifier.feed_line(line)
            verifier.end_file()
    report = verifier.finish()

It judges a line only once the next one has arrived (or at `finish`), so that
a `recovery` record can mark the line before it as not a record.  Each file
name is checked first (step 0: a `.jsonl` name that is not a day is listed in
`ignored_files`, never read).  For every line, in this order (the steps are
marked in the code):

1. newline: a line without ``\\n`` is the torn tail when it is the last line
   of the newest non-empty file, else a `missing_newline` failure;
2. parse: strict JSON (`bad_json`), then the record's schema (`bad_record`);
3. seq: the previous record's seq plus one (`seq_gap`), 0 for the first;
4. prev: the hash of the previous record's line (`hash_mismatch`);
5. references: the `call` of a decision, approval or result names an
   earlier `call` record (`bad_reference`);
6. recovery: a `recovery` record describes exactly the line before it, in
   the same file (`bad_recovery`); that line is then not a record;
7. break: a `break` names the first failure not yet accepted and counts them
   all, and its seq and prev follow the break rule (`bad_break`); when it
   does, those failures are accepted;
8. pins (12): an `mcp_pin` record's `prev` is the digest of the server's
   newest earlier `pinned` record, or null when there is none
   (`bad_reference`); a `pinned` record's pin file, when the caller can read
   it (`pin_file`), decodes strictly and holds that server, digest, protocol,
   tool count and source (`bad_pin`).  A missing file is not a failure: the
   server is then unpinned (`file_missing`), which brokerd says.

After a failure it resynchronises: the next line that parses is taken into the
chain without steps 3 and 4, so every broken region is reported, not only the
first.  A line that parses but fails a later step is reported and still taken
into the chain (later lines are checked against it).  At the end, an expected
head (``--expect-head SEQ:HASH``) must be a record of the chain at that seq
with that hash, with no failure at or before it (`head_mismatch`).

Every failure says what was expected and what was found (`Failure.detail`).
No I/O here: `boxmaker._audit_files` reads the directory.  The report and its
JSON are in `_chain_report`.
"""

from __future__ import annotations

from collections.abc import Callable
from hashlib import sha256
from itertools import compress, filterfalse
from operator import lt, not_, or_

from .._errors import DecodeError
from ._audit import (
    GENESIS_PREV,
    Break,
    Record,
    RecordJsonError,
    Recovery,
    is_day_file_name,
    parse_record,
)
from ._audit_mcp import McpPinRecord
from ._audit_scan import LineFacts, check_record_line
from ._audit_scan_block import BlockFacts, scan_block
from ._chain_report import (
    AcceptedBreak,
    ChainReport,
    Failure,
    Head,
    Recovered,
    ReportKind,
    TornTail,
)
from ._verify_pins import PinFile, pin_file_problem


class _Line:
    """A line waiting for the next one before it is judged."""

    __slots__ = ("before_hash", "content", "error", "facts", "file", "hash", "line", "newline",
                 "position", "recovery_problem")

    def __init__(self, file: str, line: int, position: int, content: bytes, newline: bool,
                 line_hash: str, before_hash: str) -> None:
        self.file = file
        self.line = line
        self.position = position  # 1-based across all files
        self.content = content
        self.newline = newline
        self.hash = line_hash
        self.before_hash = before_hash  # of the line just before, whatever it is
        self.facts: LineFacts | None = None  # when the line is a valid record
        self.error: DecodeError | None = None
        self.recovery_problem: str | None = None

    @property
    def seq(self) -> int:
        assert self.facts is not None
        return self.facts.seq

    def record(self) -> Record:
        """The record, built on demand (a line that is a valid record)."""
        return parse_record(self.content)


class _Note:
    """A failure while verifying (its `accepted` can still change)."""

    __slots__ = ("accepted", "detail", "expected", "file", "found", "kind", "line", "position",
                 "region", "seq")

    def __init__(self, kind: ReportKind, line: _Line | None, seq: int | None, *, detail: str,
                 region: int, expected: str | None, found: str | None) -> None:
        self.kind: ReportKind = kind
        self.file = line.file if line is not None else None
        self.line = line.line if line is not None else None
        self.position = line.position if line is not None else 0
        self.seq = seq
        self.detail = detail
        self.expected = expected
        self.found = found
        self.accepted = False
        self.region = region


_hexdigest = type(sha256()).hexdigest
"""A hash's `hexdigest`, called without a step of lookup per line."""

OnRecord = Callable[[Record], None]
OnLine = Callable[[bytes, LineFacts], None]
"""Called with each line taken into the chain (its bytes without ``\\n``) and its facts."""
OnBlock = Callable[[list[bytes], BlockFacts, int], None]
"""Called with the lines `feed_block` took at once (bytes without ``\\n``), their facts
and the seq of the first; with `on_line` for the other lines."""


class ChainVerifier:
    """Feed lines, get a `ChainReport`.  See the module docstring for the steps."""

    def __init__(
        self, *, expect_head: tuple[int, str] | None = None, on_record: OnRecord | None = None,
        on_line: OnLine | None = None, pin_file: PinFile | None = None,
        on_block: OnBlock | None = None,
    ) -> None:
        self._expect_head = expect_head
        self._pin_file = pin_file
        self._pins: dict[str, str] = {}  # server -> digest of its newest `pinned` record
        self._on_record = on_record
        self._on_line = on_line
        self._on_block = on_block
        self.block_lines = 0  # how many lines feed_block took at once
        self._file: str | None = None
        self._last_file: str | None = None
        self._files = 0
        self._ignored: list[str] = []
        self._line = 0  # in the current file
        self._position = 0  # across files
        self._last_line_hash = GENESIS_PREV
        self._pending: _Line | None = None
        self._finished = False
        # The chain so far: the last record taken in, and whether the chain is
        # broken just before the next line (then the next parsed line is taken
        # in without steps 3 and 4).
        self._head: _Line | None = None
        self._head_seq = -1
        self._broken = False
        self._records = 0
        self._calls: set[int] = set()
        self._running: set[int] = set()
        self._notes: list[_Note] = []
        self._open: list[_Note] = []  # failures no break has accepted yet
        self._regions = 0
        self._in_region = False
        self._breaks: list[AcceptedBreak] = []
        self._recovered: list[Recovered] = []
        self._torn: TornTail | None = None
        self._expect_found: _Line | None = None

    # -- feeding ------------------------------------------------------------

    def begin_file(self, name: str) -> bool:
        """Start a file.  False when `name` is not a day file: it is listed as
        ignored and nothing of it may be fed (and no `end_file` for it)."""
        if self._finished or self._file is not None:
            raise RuntimeError("begin_file while a file is open or after finish")
        if self._last_file is not None and name <= self._last_file:
            raise ValueError(f"files must come in name order: {name!r} after {self._last_file!r}")
        self._last_file = name
        # Step 0: the file name.  A .jsonl name that is not a day is listed.
        if not is_day_file_name(name):
            self._ignored.append(name)
            return False
        self._file = name
        self._files += 1
        self._line = 0
        return True

    def ignore_file(self, name: str) -> None:
        """List a `.jsonl` file that is not a day file (the walker's choice)."""
        self._ignored.append(name)

    def end_file(self) -> None:
        if self._file is None:
            raise RuntimeError("end_file without begin_file")
        self._file = None

    def feed_line(self, line: bytes) -> None:
        """One line of the open file, with its ``\\n`` when it has one."""
        newline = line.endswith(b"\n")
        content = line[:-1] if newline else line
        if b"\n" in content:
            raise ValueError("feed_line takes one line at a time")
        self.feed_content(content, newline)

    def feed_content(self, content: bytes, newline: bool) -> None:
        """One line given as its bytes without ``\\n`` and whether it had one."""
        file = self._file
        if file is None:
            raise RuntimeError("feed_line outside a file")
        self._line += 1
        self._position += 1
        digest = sha256(content).hexdigest()
        entry = _Line(file, self._line, self._position, content, newline, digest,
                      self._last_line_hash)
        self._last_line_hash = digest
        # Step 2 (parse) happens on arrival: whether this is a recovery decides
        # how the line before it is judged.
        try:
            facts = entry.facts = check_record_line(content)
        except DecodeError as exc:
            entry.error = exc
            facts = None
        pending = self._pending
        if facts is not None and facts.key == "recovery":
            # Step 6: a recovery describes exactly the line before it.
            event = entry.record().event
            assert type(event) is Recovery
            problem = self._recovery_problem(event, entry, pending)
            if problem is None:
                assert pending is not None
                self._recovered.append(Recovered(file=pending.file, line=pending.line))
                pending = None
            else:
                entry.recovery_problem = problem
        if pending is not None:
            self._judge(pending)
        self._pending = entry

    def feed_block(self, block: bytes) -> None:
        """Whole lines of the open file, each with its ``\\n``: the same as
        `feed_content` for each, in order (tests compare the two).  The lines
        between the first and the last are taken at once when all of them are
        ordinary records in their one form that continue the chain (seq, prev,
        references): `scan_block` checks their form, the chain is compared as
        columns.  Anything else, the lines one by one."""
        lines = block.split(b"\n")
        if lines.pop() != b"":
            raise ValueError("feed_block takes whole lines, each with its newline")
        feed = self.feed_content
        if len(lines) < 3 or not self._fast_ready():
            for line in lines:
                feed(line, True)
            return
        feed(lines[0], True)
        middle = lines[1:-1]
        # a recovery after them describes the line before it, which must then be
        # the one waiting (pending): then the lines one by one
        start, end = len(lines[0]) + 1, len(block) - len(lines[-1]) - 2
        if b'"recovery":' in lines[-1] or not self._take_block(block, start, end, middle):
            for line in middle:
                feed(line, True)
        feed(lines[-1], True)

    def _fast_ready(self) -> bool:
        return self._on_record is None and (self._on_line is None or self._on_block is not None)

    def _take_block(self, block: bytes, start: int, end: int, lines: list[bytes]) -> bool:
        """Take `lines` (``block[start:end]``) at once; False (nothing of them taken)
        when they are not all ordinary records continuing the chain."""
        pending = self._pending
        if pending is None or pending.facts is None or self._file is None:
            return False
        try:
            text = block.decode("ascii")
        except UnicodeDecodeError:
            return False
        facts = scan_block(text, len(lines), start, end)
        if facts is None:
            return False
        # the line before: judged now, as the next line (no recovery) would have it
        self._pending = None
        self._judge(pending)
        head = self._head
        if self._broken or head is not pending:  # pragma: no cover - a parsed line is taken
            return False
        count = len(lines)
        first = self._head_seq + 1
        if facts.seqs != list(map(str, range(first, first + count))):
            return False
        hashes = list(map(_hexdigest, map(sha256, lines)))
        prevs = facts.prevs
        if prevs[0] != head.hash or prevs[1:] != hashes[:-1]:
            return False
        expect = self._expect_head
        if expect is not None and self._expect_found is None and first <= expect[0] < first + count:
            return False
        # step 5: each names an earlier call record: one before the block, or a
        # call line of the block before it
        calls = self._calls
        ref_seqs = list(map(first.__add__, facts.refs))
        ref_calls = facts.ref_calls
        block_calls = set(compress(range(first, first + count), facts.is_call))
        if not all(map(lt, ref_calls, ref_seqs)) or not all(
                map(calls.__contains__, filterfalse(block_calls.__contains__, ref_calls))):
            return False
        calls.update(block_calls)
        # calls let run with no result yet: what the last line naming each did
        keys = facts.keys
        is_result = list(map("result".__eq__, map(keys.__getitem__, facts.refs)))
        acts = list(map(or_, is_result, facts.ref_lets))
        last = dict(zip(compress(ref_calls, acts), map(not_, compress(is_result, acts)),
                        strict=True))
        self._running.update(compress(last, last.values()))
        self._running.difference_update(compress(last, map(not_, last.values())))
        self._line += count
        self._position += count
        self._records += count
        self.block_lines += count
        self._last_line_hash = hashes[-1]
        entry = _Line(self._file, self._line, self._position, lines[-1], True, hashes[-1],
                      hashes[-2] if count > 1 else head.hash)
        # only its seq is read of a head's facts (the chain's next line is judged against it)
        entry.facts = LineFacts(first + count - 1, prevs[-1], facts.keys[-1], None, False)
        self._head = entry
        self._head_seq = first + count - 1
        self._in_region = False
        if self._on_block is not None:
            self._on_block(lines, facts, first)
        return True

    def finish(self) -> ChainReport:
        if self._file is not None:
            raise RuntimeError("finish with a file still open")
        if not self._finished:
            self._finished = True
            pending = self._pending
            self._pending = None
            if pending is not None:
                if not pending.newline:
                    # Step 1: the last line of the newest non-empty file.
                    self._torn = TornTail(
                        file=pending.file, line=pending.line, bytes=len(pending.content),
                        sha256=pending.hash,
                    )
                else:
                    self._judge(pending)
            self._check_expected_head()
        return self._report()

    # -- judging --------------------------------------------------------------

    def _fail(self, kind: ReportKind, line: _Line | None, seq: int | None, detail: str, *,
              expected: str | None = None, found: str | None = None) -> None:
        if not self._in_region:
            self._in_region = True
            self._regions += 1
        note = _Note(kind, line, seq, detail=detail, region=self._regions, expected=expected,
                     found=found)
        self._notes.append(note)
        if kind != "head_mismatch":
            self._open.append(note)

    def _judge(self, entry: _Line) -> None:
        # Step 1: newline.  Only the very last line may lack one (the torn tail).
        if not entry.newline:
            self._fail("missing_newline", entry, None,
                       "expected the line to end with a newline, found none "
                       "(and it is not the torn tail)")
            self._broken = True
            return
        # Step 2: parse (done on arrival).
        facts = entry.facts
        if facts is None:
            error = entry.error
            assert error is not None
            kind: ReportKind = "bad_json" if isinstance(error, RecordJsonError) else "bad_record"
            self._fail(kind, entry, None, str(error))
            self._broken = True
            return
        seq, prev, key, call, lets_run = facts
        failed = False
        if entry.recovery_problem is not None:
            self._fail("bad_recovery", entry, seq, entry.recovery_problem)
            failed = True
        elif key == "break":
            failed = self._judge_break(entry)
        elif not self._broken:
            # Step 3: seq.
            want_seq = self._head_seq + 1
            if seq != want_seq:
                self._fail("seq_gap", entry, seq, f"expected seq {want_seq}, found {seq}")
                failed = True
            # Step 4: prev.
            else:
                head = self._head
                want_prev = head.hash if head is not None else GENESIS_PREV
                if prev != want_prev:
                    self._fail("hash_mismatch", entry, seq,
                               f"expected prev {want_prev}, found {prev}",
                               expected=want_prev, found=prev)
                    failed = True
        # Step 5: references.
        if call is not None:
            if call in self._calls:
                # Calls let run with no result yet (unfinished_calls).
                if key == "result":
                    self._running.discard(call)
                elif lets_run:
                    self._running.add(call)
            elif not failed:
                self._fail("bad_reference", entry, seq,
                           f"expected call {call} to name an earlier call record, found none")
                failed = True
        elif key == "call":
            self._calls.add(seq)
        # Step 8: pins.
        if key == "mcp_pin":
            failed = self._judge_pin(entry, seq, failed)
        self._take(entry, failed)

    def _judge_pin(self, entry: _Line, seq: int, failed: bool) -> bool:
        event = entry.record().event
        assert type(event) is McpPinRecord
        want_prev = self._pins.get(event.server)
        if event.digest is not None:
            self._pins[event.server] = event.digest
        if failed:
            return True
        if event.prev != want_prev:
            self._fail("bad_reference", entry, seq,
                       f"expected prev {want_prev or 'null'} (the server's newest earlier pin), "
                       f"found {event.prev or 'null'}", expected=want_prev, found=event.prev)
            return True
        if self._pin_file is not None and event.digest is not None:
            problem = pin_file_problem(event, self._pin_file(event.digest))
            if problem is not None:
                self._fail("bad_pin", entry, seq, problem)
                return True
        return False

    def _take(self, entry: _Line, failed: bool) -> None:
        """Take a parsed line into the chain as its new head."""
        self._head = entry
        self._head_seq = entry.seq
        self._broken = False
        self._records += 1
        if not failed:
            self._in_region = False
        expect = self._expect_head
        if expect is not None and entry.seq == expect[0] and self._expect_found is None:
            self._expect_found = entry
        if self._on_record is not None:
            self._on_record(entry.record())
        if self._on_line is not None:
            assert entry.facts is not None
            self._on_line(entry.content, entry.facts)

    def _recovery_problem(self, event: Recovery, entry: _Line, before: _Line | None) -> str | None:
        # Step 6: the recovery and the torn line it describes.
        if before is None or before.file != entry.file:
            return f"expected a line before the recovery in {entry.file}, found none"
        if event.file != before.file or event.line != before.line:
            return (f"expected it to name {before.file} line {before.line}, "
                    f"found {event.file} line {event.line}")
        if event.bytes != len(before.content):
            return f"expected bytes {len(before.content)}, found {event.bytes}"
        if event.sha256 != before.hash:
            return f"expected sha256 {before.hash}, found {event.sha256}"
        return None

    def _judge_break(self, entry: _Line) -> bool:
        # Step 7: a break names the first open failure, counts them all, and
        # takes its seq from lines: the last record's seq plus the lines from
        # there to the break (itself included); its prev is the line before it.
        seq = entry.seq
        event = entry.record().event
        assert type(event) is Break
        head = self._head
        if head is None:
            want_seq = entry.position - 1
        else:
            want_seq = self._head_seq + entry.position - head.position
        problem: str | None = None
        open_failures = self._open
        if not open_failures:
            problem = "expected a failure before the break to accept, found none"
        else:
            first = open_failures[0]
            want_first = (first.file, first.line, first.kind)
            found_first = (event.first.file, event.first.line, event.first.kind)
            if want_first != found_first:
                problem = (f"expected the first failure {want_first[0]} line {want_first[1]} "
                           f"{want_first[2]}, found {found_first[0]} line {found_first[1]} "
                           f"{found_first[2]}")
            elif event.failures != len(open_failures):
                problem = f"expected failures {len(open_failures)}, found {event.failures}"
            elif seq != want_seq:
                problem = f"expected seq {want_seq}, found {seq}"
            elif entry.facts is not None and entry.facts.prev != entry.before_hash:
                problem = f"expected prev {entry.before_hash}, found {entry.facts.prev}"
        if problem is not None:
            self._fail("bad_break", entry, seq, problem)
            return True
        for note in open_failures:
            note.accepted = True
        self._breaks.append(AcceptedBreak(file=entry.file, line=entry.line,
                                          first=event.first, failures=event.failures))
        self._open = []
        return False

    def _check_expected_head(self) -> None:
        expect = self._expect_head
        if expect is None:
            return
        seq, digest = expect
        found = self._expect_found
        if found is None:
            head = self._head
            self._fail("head_mismatch", head, seq,
                       f"expected a record with seq {seq} in the chain, found none "
                       f"(the chain ends at seq {self._head_seq})", expected=digest)
        elif found.hash != digest:
            self._fail("head_mismatch", found, seq,
                       f"expected the record with seq {seq} to hash {digest}, "
                       f"found {found.hash}", expected=digest, found=found.hash)
        else:
            earlier = [n for n in self._notes if n.position <= found.position]
            if earlier:
                self._fail("head_mismatch", found, seq,
                           f"expected no failure at or before seq {seq}, found "
                           f"{len(earlier)} (the first: {earlier[0].kind} at "
                           f"{earlier[0].file} line {earlier[0].line})",
                           expected=digest, found=found.hash)

    def _report(self) -> ChainReport:
        failures = [
            Failure(kind=n.kind, file=n.file, line=n.line, seq=n.seq, expected=n.expected,
                    found=n.found, accepted=n.accepted, detail=n.detail, region=n.region)
            for n in self._notes
        ]
        head = self._head
        if head is None:
            head_out = None
        else:
            head_out = Head(seq=self._head_seq, hash=head.hash, file=head.file, line=head.line)
        # A break appended now: seq from lines, prev the last line's hash.
        if head is None:
            break_seq = self._position
        else:
            break_seq = self._head_seq + self._position + 1 - head.position
        return ChainReport(
            ok=all(f.accepted for f in failures),
            files=self._files,
            records=self._records,
            head=head_out,
            failures=failures,
            accepted_breaks=list(self._breaks),
            recovered=list(self._recovered),
            torn_tail=self._torn,
            unfinished_calls=sorted(self._running),
            ignored_files=list(self._ignored),
            regions=self._regions,
            break_seq=break_seq,
            break_prev=self._last_line_hash,
        )
