"""boxmaker/_pin_choice.py: brokerd's pin choice, shared with bxctl offline.  The
ledger of a log's lines sees only the records of `mcp_pin`, `mcp_server` and
`break` (a call whose arguments quote those keys is not one), passes over a
damaged one, and each declared server's pin is its newest record's file, checked
(12-tool-sources "Loading and checking a pin")."""

from __future__ import annotations

from boxmaker._pin_choice import choose_pins, feed_pins, ledger_of_lines, moves_pins
from boxmaker.brokerd._tool_sources import pin_record, unpin_record
from boxmaker.proto.audit import Call, Peer, parse_record
from boxmaker.proto.mcp import PinLedger, SourceSet, encode_pin, parse_source_texts
from tests.brokerd._mcp_home import pin_for
from tests.fakes.audit_log import LogBuilder
from tests.test_source_files import SOURCE, TOOLS


def _lines(builder: LogBuilder) -> list[bytes]:
    return [line.rstrip(b"\n") for lines in builder.files.values() for line in lines]


def test_only_the_pin_keys_move_the_ledger() -> None:
    pin = pin_for(SOURCE, "git", TOOLS)
    builder = LogBuilder("2026-12-02.jsonl")
    builder.start()
    builder.add(Call(session="s-1", tool="read_file",
                     args={"path": '"mcp_pin":{"server":"git"}', "prev": '"mcp_pin":'},
                     peer=Peer(uid=1000, pid=1)))
    builder.add(pin_record(pin, prev=None, by=1000))
    builder.add(unpin_record("git", prev=pin.digest, by=1000, reason=None))
    lines = _lines(builder)
    assert [moves_pins(line) for line in lines] == [False, False, True, True]
    ledger = ledger_of_lines(lines)
    newest = ledger.newest("git")
    assert newest is not None and (newest.event, newest.seq) == ("unpinned", 3)
    assert ledger.last_pinned("git") == pin.digest
    # the same fold from parsed records (brokerd's start-up)
    folded = PinLedger()
    for line in lines:
        feed_pins(folded, parse_record(line))
    assert folded.newest("git") == newest


def test_a_damaged_pin_line_is_passed_over() -> None:
    pin = pin_for(SOURCE, "git", TOOLS)
    builder = LogBuilder("2026-12-02.jsonl")
    builder.add(pin_record(pin, prev=None, by=1000))
    builder.add(unpin_record("git", prev=pin.digest, by=1000, reason=None))
    first, second = _lines(builder)
    damaged = second.replace(b'"action":"unpinned"', b'"action":"gone"')
    assert moves_pins(damaged)
    newest = ledger_of_lines([first, damaged]).newest("git")
    assert newest is not None and newest.event == "pinned"


def test_each_server_gets_its_newest_records_file_checked() -> None:
    state = parse_source_texts({"s.toml": SOURCE + SOURCE.replace('"git"', '"two"')})
    assert isinstance(state, SourceSet), state
    pin = pin_for(SOURCE, "git", TOOLS)
    other = pin_for(SOURCE, "git", [dict(TOOLS[0], description="Other.")])
    ledger = PinLedger()
    ledger.pinned("git", pin.digest, 4)
    files = {pin.digest: encode_pin(pin), other.digest: encode_pin(other)}
    asked: list[str] = []

    def read(digest: str) -> bytes | None:
        asked.append(digest)
        return files.get(digest)

    checks = choose_pins(state.servers, ledger, read)
    assert checks["git"].pin == pin and checks["two"].reason == "none"
    assert asked == [pin.digest]  # only the record's file is read
    files[pin.digest] = encode_pin(other)  # another pin's bytes under this name
    assert choose_pins(state.servers, ledger, read)["git"].reason == "file_damaged"
    del files[pin.digest]
    assert choose_pins(state.servers, ledger, read)["git"].reason == "file_missing"
    ledger.drifted("git", 9)
    assert choose_pins(state.servers, ledger, read)["git"].reason == "drifted"
