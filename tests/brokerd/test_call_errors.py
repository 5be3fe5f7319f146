"""The errors a broker.sock call is answered with: boxmaker/brokerd/_call_errors.py."""

from __future__ import annotations

from boxmaker.brokerd._call_errors import CallFailed, CallNotRecorded, RunnerUnavailable
from boxmaker.proto.wire import answer_of


def test_each_is_answered_with_its_code_and_its_message_as_written() -> None:
    runner = answer_of(RunnerUnavailable("brokerd: no podman; nothing ran"))
    assert runner is not None
    assert (runner.code, runner.message, runner.runbook) == (
        "runner_unavailable", "brokerd: no podman; nothing ran",
        "docs/runbook.md#runner-unavailable")
    audit = answer_of(CallNotRecorded("the log is gone. See docs/runbook.md#audit-unavailable"))
    assert audit is not None
    assert (audit.code, audit.runbook) == ("audit_unavailable",
                                           "docs/runbook.md#audit-unavailable")
    assert audit.message == "the log is gone. See docs/runbook.md#audit-unavailable"


def test_an_error_reply_compares_by_its_error_s_class_and_message() -> None:
    # The table's error reply is the wire answer of its error (`answer_of`).
    assert answer_of(RunnerUnavailable("x")) == answer_of(RunnerUnavailable("x"))
    assert answer_of(RunnerUnavailable("x")) != answer_of(CallNotRecorded("x"))
    assert answer_of(RunnerUnavailable("x")) != answer_of(RunnerUnavailable("y"))
    assert issubclass(RunnerUnavailable, CallFailed) and issubclass(CallNotRecorded, CallFailed)
