"""broker.sock pieces: denials.  (Bad frames and closing after an error are the
connection shell's: tests/sockets/test_framed_server.py.)"""

from __future__ import annotations

from boxmaker.brokerd._call_events import denied


def test_denials_carry_their_runbook() -> None:
    assert denied("grants_invalid", "r", None).runbook == "docs/runbook.md#grants-invalid"
    assert denied("no_grant", "r", None).runbook is None
    assert denied("refused", "r", "g").grant == "g"
