"""broker.sock pieces: bad-frame answers, denials, and closing after an error."""

from __future__ import annotations

import trio
import trio.testing

from boxmaker.brokerd._broker import bad_frame_answer, denied, linger_close
from boxmaker.proto._errors import DecodeError
from boxmaker.proto._wire import BadVersion


def test_bad_frame_answers() -> None:
    rid, answer = bad_frame_answer(b'{"v":1,"id":7,"call":5}', DecodeError("x", path="$.call"))
    assert rid == 7 and answer.code == "bad_frame"
    assert answer.runbook == "docs/runbook.md#bad-frame"
    rid, answer = bad_frame_answer(b"\xff", DecodeError("not UTF-8"))
    assert rid is None
    rid, answer = bad_frame_answer(b'{"v":2,"id":3}', BadVersion("v is 2", id=3))
    assert rid == 3 and answer.code == "bad_version"


def test_denials_carry_their_runbook() -> None:
    assert denied("grants_invalid", "r", None).runbook == "docs/runbook.md#grants-invalid"
    assert denied("no_grant", "r", None).runbook is None
    assert denied("refused", "r", "g").grant == "g"


async def test_linger_close_drains_then_returns(autojump_clock: trio.testing.MockClock) -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.send_all(b"x" * 10_000)
    await linger_close(ours)  # reads what is there, then gives up after its second
    await theirs.aclose()
    ours2, theirs2 = trio.testing.memory_stream_pair()
    await theirs2.aclose()
    await linger_close(ours2)  # end of input: returns at once
