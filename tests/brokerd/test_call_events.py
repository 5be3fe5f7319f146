"""The call table's events, verdict and replies (boxmaker/brokerd/_call_events.py)."""

from __future__ import annotations

from boxmaker.brokerd._call_events import (
    Approved,
    Decided,
    args_too_long,
    bounded_request,
    denied,
    exhausted,
    too_many_pending,
)
from boxmaker.proto._taint import NEW_SESSION
from boxmaker.proto.wire import DENIAL_RUNBOOKS
from tests.brokerd._calls import allow, ask, deny


def test_a_decided_event_is_named_by_its_verdict() -> None:
    assert Decided(verdict=allow(), taint=NEW_SESSION, grants_digest="").kind == "decided_allow"
    assert Decided(verdict=ask(), taint=NEW_SESSION, grants_digest="").kind == "decided_ask"
    assert Decided(verdict=deny("no_grant", "r"), taint=NEW_SESSION,
                   grants_digest="").kind == "decided_deny"
    assert Approved(redecision=allow(), taint=NEW_SESSION, by=0).kind == "approved_allow"
    assert Approved(redecision=deny("changed", "r"), taint=NEW_SESSION,
                    by=0).kind == "approved_deny"


def test_brokerd_s_own_denials_are_decisions_under_the_asked_grant() -> None:
    asked = ask()
    for made, code in ((exhausted(asked, "all taken"), "approvals_exhausted"),
                       (too_many_pending(asked, "too many"), "too_many_pending")):
        assert made.code == code and not made.allowed and made.grant == asked.grant
        assert made.reason.endswith(f"See {DENIAL_RUNBOOKS[code]}")  # type: ignore[index]


def test_arguments_too_long_are_denied_with_their_size() -> None:
    request, too_long = bounded_request("s1", "echo", {"text": "x" * 100}, peer_uid=1,
                                        peer_pid=2, max_args_bytes=10)
    assert request.omitted is not None and too_long == args_too_long(111, 10)
    assert too_long.startswith("the arguments are 111 bytes; at most 10 are allowed")
    request, too_long = bounded_request("s1", "echo", {"text": "x"}, peer_uid=1, peer_pid=2,
                                        max_args_bytes=100)
    assert request.omitted is None and too_long is None


def test_a_denied_answer_carries_its_code_s_pointer() -> None:
    answer = denied("too_many_pending", "r", "g")
    assert answer.runbook == DENIAL_RUNBOOKS["too_many_pending"] and answer.grant == "g"
