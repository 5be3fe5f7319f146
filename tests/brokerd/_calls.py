"""Verdicts and events for driving the call table (tests/brokerd/test_lifecycle*.py).

Verdicts come from the real policy (a Decision is built only by it), over
grant sets that allow, ask for or deny `echo`.
"""

from __future__ import annotations

from boxmaker.brokerd._call_events import (
    Approved,
    AuditFailed,
    CallEvent,
    CallRequest,
    Decided,
    Expired,
    NotRun,
    Refused,
    RequesterGone,
    Settled,
    Started,
    Ticket,
    Verdict,
)
from boxmaker.brokerd._lifecycle import CallLifecycle
from boxmaker.brokerd._policy_link import PolicyLink
from boxmaker.policy._decision import Ask, Decision, refusal
from boxmaker.policy._grants import parse_grant_texts
from boxmaker.policy._model import GrantState
from boxmaker.proto._taint import NEW_SESSION, Taint
from boxmaker.proto.wire import DenialCode

LINK = PolicyLink.of(["/srv/boxmaker"])
ARGS = {"text": "x"}


def echo_grants(mode: str | None, label: str = "public") -> GrantState:
    """A grant set whose one grant gives `echo` this mode (None: no grant at all)."""
    if mode is None:
        return parse_grant_texts({})
    return parse_grant_texts({"echo.toml": f"""
[[grant]]
id = "echo-{mode}"
tool = "echo"
mode = "{mode}"
label = "{label}"
max_label = "secret"
when_untrusted = "{mode}"
"""})


GRANT_SETS = {mode: echo_grants(mode) for mode in ("allow", "ask", "deny", None)}
"""allow, ask, deny and none: what a grant change may switch between."""


def request(session: str = "s1") -> CallRequest:
    return CallRequest(session=session, tool="echo", args=ARGS, peer_uid=1000, peer_pid=7)


def verdict(mode: str | None, taint: Taint = NEW_SESSION) -> Verdict:
    return LINK.decide("echo", ARGS, taint, GRANT_SETS[mode])


def allow() -> Decision:
    found = verdict("allow")
    assert isinstance(found, Decision) and found.allowed
    return found


def ask() -> Ask:
    found = verdict("ask")
    assert isinstance(found, Ask)
    return found


def deny(code: DenialCode, reason: str, grant: str | None = None) -> Decision:
    """A denial with these words (the policy's shape, as brokerd's own denials are made)."""
    return refusal(code, reason, tool="echo", state=NEW_SESSION, grant=grant)


def ticket(approval_id: int = 123_456, deadline: float = 600.0) -> Ticket:
    return Ticket(approval_id=approval_id, grant="echo-ask",
                  requested_at="2026-11-29T07:00:00.000000Z",
                  expires_at="2026-11-29T07:10:00.000000Z", deadline=deadline, ttl_s=600.0,
                  challenge=b"c" * 32)


def decided(v: Verdict, taint: Taint = NEW_SESSION, approval_id: int = 123_456) -> Decided:
    return Decided(verdict=v, taint=taint, grants_digest="0" * 64,
                   ticket=ticket(approval_id) if isinstance(v, Ask) else None)


def event_of(kind: str, taint: Taint = NEW_SESSION) -> CallEvent:
    """One event of each kind of the table."""
    events: dict[str, CallEvent] = {
        "decided_allow": decided(allow()),
        "decided_ask": decided(ask()),
        "decided_deny": decided(deny("no_grant", "no grant")),
        "approved_allow": Approved(redecision=allow(), taint=taint, by=1000),
        "approved_deny": Approved(redecision=deny("changed", "the grants changed"),
                                  taint=taint, by=1000),
        "refused": Refused(by=1000, reason="no"),
        "expired": Expired(),
        "requester_gone": RequesterGone(),
        "started": Started(),
        "not_run": NotRun(reason="the queue is full", taint=taint),
        "settled": Settled(status="ok", output={"text": "x"}, message=None, taint=taint),
        "audit_failed": AuditFailed(message="the audit log cannot be written"),
    }
    return events[kind]


KINDS = ("decided_allow", "decided_ask", "decided_deny", "approved_allow", "approved_deny",
         "refused", "expired", "requester_gone", "started", "not_run", "settled",
         "audit_failed")

PATHS: dict[str, tuple[str, ...]] = {
    "received": (),
    "decided": ("decided_allow",),
    "pending": ("decided_ask",),
    "denied": ("decided_deny",),
    "approved": ("decided_ask", "approved_allow"),
    "refused": ("decided_ask", "refused"),
    "expired": ("decided_ask", "expired"),
    "requester_gone": ("decided_ask", "requester_gone"),
    "running": ("decided_allow", "started"),
    "settled": ("decided_allow", "started", "settled"),
    "unrecorded": ("decided_allow", "audit_failed"),
}
"""A way into each state (its last step's records not yet confirmed)."""


def call_in(state: str, call_id: int = 1) -> CallLifecycle:
    call = CallLifecycle(call_id, request())
    for kind in PATHS[state]:
        if kind != "audit_failed":  # that one follows a step whose append failed
            call.recorded()
        call.feed(event_of(kind))
    assert call.state.value == state
    return call
